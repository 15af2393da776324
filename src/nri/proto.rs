//! The NRI API's generated protobuf types ([`api`]) and ttRPC stubs
//! ([`api_ttrpc`]), from `proto/nri/api.proto` by `build.rs`. Nothing here is
//! written by hand.

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
pub mod api {
    include!(concat!(env!("OUT_DIR"), "/api.rs"));
}

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
pub mod api_ttrpc {
    include!(concat!(env!("OUT_DIR"), "/api_ttrpc.rs"));
}
