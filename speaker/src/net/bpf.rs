//! Classic BPF for the socket filters (`packet_socket`, `udp_bfd`,
//! `bfd_echo`): one instruction constructor and the opcodes they use
//! (linux/filter.h).

/// One BPF instruction, as `struct sock_filter`.
pub(crate) const fn op(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

pub(crate) const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
pub(crate) const LD_H_ABS: u16 = 0x28; // BPF_LD | BPF_H | BPF_ABS
pub(crate) const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
pub(crate) const LD_H_IND: u16 = 0x48; // BPF_LD | BPF_H | BPF_IND
pub(crate) const LDX_B_MSH: u16 = 0xb1; // BPF_LDX | BPF_B | BPF_MSH
pub(crate) const TAX: u16 = 0x07; // BPF_MISC | BPF_TAX
pub(crate) const TXA: u16 = 0x87; // BPF_MISC | BPF_TXA
pub(crate) const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
pub(crate) const JEQ_X: u16 = 0x1d; // BPF_JMP | BPF_JEQ | BPF_X
pub(crate) const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
pub(crate) const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
pub(crate) const RET_K: u16 = 0x06; // BPF_RET | BPF_K
