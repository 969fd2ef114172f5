//! Broker: partition logs on JBOD dirs (filled in by the brokers issue).
