//! OS glue: sockets and socket options, and the C allocator's statistics.
//! The only module where `unsafe` is allowed, each block with a
//! `// SAFETY:` comment.

pub(crate) mod addrs;
pub(crate) mod bfd_echo;
pub(crate) mod bpf;
pub(crate) mod heap;
pub(crate) mod netlink;
pub(crate) mod packet_socket;
pub(crate) mod router_socket;
pub(crate) mod tcp;
pub(crate) mod udp_bfd;
