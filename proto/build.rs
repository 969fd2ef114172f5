//! Compiles the protos with protox, so no system `protoc` is needed.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/metastore.proto",
        "proto/raft.proto",
        "proto/ferry.proto",
        "proto/plan.proto",
        "proto/security.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("descriptor.bin"), prost::Message::encode_to_vec(&fds))?;
    // Every node holds a partition state per partition, in several views; boxed, the reassignment
    // that few of them have costs the others a pointer instead of its 112 bytes.
    tonic_prost_build::configure()
        .bytes(".")
        .boxed(".ferry.v1.PartitionState.reassignment")
        .compile_fds(fds)?;
    Ok(())
}
