//! The NRI API's generated protobuf types ([`api`]) and ttRPC stubs
//! ([`api_ttrpc`]), from `proto/nri/api.proto` by `build.rs`. Nothing here is
//! written by hand.

/// A module of generated code, included from `OUT_DIR`, with the lints
/// that hand-written code keeps off.
macro_rules! generated {
    ($name:ident, $file:literal) => {
        #[allow(
            clippy::all,
            clippy::pedantic,
            missing_docs,
            unused_imports,
            unused_results,
            unused_mut,
            unreachable_pub
        )]
        #[allow(non_camel_case_types, non_snake_case, non_upper_case_globals, dead_code)]
        pub mod $name {
            include!(concat!(env!("OUT_DIR"), "/", $file));
        }
    };
}

generated!(api, "api.rs");
generated!(api_ttrpc, "api_ttrpc.rs");
