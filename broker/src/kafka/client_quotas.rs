//! DescribeClientQuotas and AlterClientQuotas, forwarded to the controller
//! (`controller::client_quotas` checks, stores and reads them); what `kafka-configs
//! --entity-type clients|users` sends. Brokers enforce the stored byte rates (`throttling`).

use kafka_protocol::messages::alter_client_quotas_response::{EntityData as AlteredEntity, EntryData as Altered};
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use proto::errors::ErrorCode;
use proto::ferry as pb;

use super::admin::{call, text};
use super::apis::wire;
use crate::controller_channels::ControllerChannels;

fn str_of(s: &Option<StrBytes>) -> Option<String> {
    s.as_ref().map(|s| s.to_string())
}

/// DescribeClientQuotas: the entities the filter matches, with their quotas.
pub async fn describe(ch: &ControllerChannels, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    let grpc = pb::DescribeClientQuotasRequest {
        components: req
            .components
            .iter()
            .map(|c| pb::QuotaFilterComponent {
                entity_type: c.entity_type.to_string(),
                match_type: i32::from(c.match_type),
                name: str_of(&c._match),
            })
            .collect(),
        strict: req.strict,
    };
    let mut resp = DescribeClientQuotasResponse::default();
    let a = match call(ch, |mut c| async move { c.describe_client_quotas(grpc).await }).await {
        Ok(a) => a,
        Err((code, message)) => {
            resp.error_code = code;
            resp.error_message = text(&message);
            return resp;
        }
    };
    if a.error_code != 0 {
        resp.error_code = wire(ErrorCode(a.error_code));
        resp.error_message = text(&a.error_message);
        return resp;
    }
    resp.entries = Some(
        a.entries
            .into_iter()
            .map(|e| {
                let mut out = EntryData::default();
                out.entity = e
                    .entity
                    .into_iter()
                    .map(|p| {
                        let mut d = EntityData::default();
                        d.entity_type = StrBytes::from_string(p.entity_type);
                        d.entity_name = p.name.map(StrBytes::from_string);
                        d
                    })
                    .collect();
                let mut values: Vec<(String, f64)> = e.quotas.into_iter().collect();
                values.sort_by(|a, b| a.0.cmp(&b.0));
                out.values = values
                    .into_iter()
                    .map(|(k, v)| {
                        let mut d = ValueData::default();
                        d.key = StrBytes::from_string(k);
                        d.value = v;
                        d
                    })
                    .collect();
                out
            })
            .collect(),
    );
    resp
}

/// AlterClientQuotas: each entry checked and answered on its own; validate-only writes nothing.
pub async fn alter(ch: &ControllerChannels, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let grpc = pb::AlterClientQuotasRequest {
        entries: req
            .entries
            .iter()
            .map(|e| pb::ClientQuotaAlteration {
                entity: e
                    .entity
                    .iter()
                    .map(|p| pb::QuotaEntityPart {
                        entity_type: p.entity_type.to_string(),
                        name: str_of(&p.entity_name),
                    })
                    .collect(),
                ops: e
                    .ops
                    .iter()
                    .map(|o| pb::QuotaOp {
                        key: o.key.to_string(),
                        value: o.value,
                        remove: o.remove,
                    })
                    .collect(),
            })
            .collect(),
        validate_only: req.validate_only,
    };
    let answer = call(ch, |mut c| async move { c.alter_client_quotas(grpc).await }).await;
    // One code and message per entry: the request's own refusal, or each entry's result.
    let results: Vec<(i16, String)> = match answer {
        Err(failure) => vec![failure; req.entries.len()],
        Ok(a) if a.error_code != 0 => vec![(wire(ErrorCode(a.error_code)), a.error_message); req.entries.len()],
        Ok(a) => a
            .results
            .into_iter()
            .map(|r| (wire(ErrorCode(r.error_code)), r.error_message))
            // -1 is Kafka's UNKNOWN_SERVER_ERROR.
            .chain(std::iter::repeat((
                -1,
                "the controller gave no result for this entry".to_string(),
            )))
            .take(req.entries.len())
            .collect(),
    };
    let mut resp = AlterClientQuotasResponse::default();
    resp.entries = req
        .entries
        .into_iter()
        .zip(results)
        .map(|(e, (code, message))| {
            let mut out = Altered::default();
            out.error_code = code;
            out.error_message = text(&message);
            out.entity = e
                .entity
                .into_iter()
                .map(|p| {
                    let mut d = AlteredEntity::default();
                    d.entity_type = p.entity_type;
                    d.entity_name = p.entity_name;
                    d
                })
                .collect();
            out
        })
        .collect();
    resp
}
