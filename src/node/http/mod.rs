//! HTTP/1.1 for the node: request parsing, responses and the mio server.

mod chunked;
mod conn;
mod front_counts;
mod handshake;
mod linger;
#[cfg(test)]
mod parse_properties;
mod read_budget;
pub mod request;
pub mod response;
pub mod server;
mod spare_fd;
pub mod tls;

pub use chunked::ChunkedProgress;
pub use front_counts::FrontCounts;
pub use request::Request;
pub use response::Response;
pub use server::{Handler, Later, Replier, Server, Stopper};
