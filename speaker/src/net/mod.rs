//! OS glue: sockets and socket options. The only module where `unsafe`
//! is allowed, each block with a `// SAFETY:` comment.

pub mod addrs;
pub mod netlink;
pub mod packet_socket;
pub mod tcp;
pub mod udp_bfd;
