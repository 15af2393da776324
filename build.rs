//! Generates the NRI API's protobuf types and ttRPC stubs from
//! `proto/nri/api.proto` (see proto/README.md) into `OUT_DIR`, with
//! rust-protobuf's pure parser: no `protoc` needed. The generated files'
//! inner attributes are dropped so that `src/nri/proto.rs` can `include!`
//! them inside a module of its own.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=proto/nri/api.proto");
    println!("cargo:rerun-if-changed=build.rs");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let gen = Path::new(&out).join("nri-gen");
    std::fs::create_dir_all(&gen).expect("creating OUT_DIR/nri-gen");
    ttrpc_codegen::Codegen::new()
        .out_dir(&gen)
        .include("proto/nri")
        .input("proto/nri/api.proto")
        .rust_protobuf()
        .customize(ttrpc_codegen::Customize { gen_mod: false, ..Default::default() })
        .run()
        .expect("generating the NRI API from proto/nri/api.proto");
    for name in ["api.rs", "api_ttrpc.rs"] {
        let text = std::fs::read_to_string(gen.join(name)).expect("reading a generated file");
        let kept: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("#!") && !l.trim_start().starts_with("//!"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(Path::new(&out).join(name), kept).expect("writing a generated file");
    }
}
