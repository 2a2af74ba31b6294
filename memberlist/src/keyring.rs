//! Shared AES-256-GCM keys: one primary key that encrypts, more keys that
//! are tried when decrypting, so a cluster can rotate keys without a split
//! (the scheme of hashicorp/memberlist's keyring).
//!
//! Pure data plus ciphers. It draws no random numbers (nonces come from the
//! core's `Rng`) and never logs key material.

use std::fmt;

use aes_gcm::Aes256Gcm;
use aes_gcm::aes::Aes256;
use aes_gcm::aes::cipher::{BlockCipherEncrypt, KeyInit};

/// How packets and stream messages are protected. There is no default:
/// plaintext must be asked for.
#[derive(Clone, Debug)]
pub enum Security {
    /// No encryption or authentication. Only for tests and lab setups: a
    /// plaintext node and an encrypted node drop each other's messages.
    Plaintext,
    /// AES-256-GCM under a shared keyring.
    Encrypted(Keyring),
}

impl Security {
    /// The keyring, if encrypted.
    #[must_use]
    pub fn keyring(&self) -> Option<&Keyring> {
        match self {
            Self::Plaintext => None,
            Self::Encrypted(k) => Some(k),
        }
    }

    /// The keyring, mutably, if encrypted.
    pub fn keyring_mut(&mut self) -> Option<&mut Keyring> {
        match self {
            Self::Plaintext => None,
            Self::Encrypted(k) => Some(k),
        }
    }
}

/// A 256-bit AES-GCM key with its one-octet key id.
///
/// The id is the first octet of AES-256 under the key applied to a fixed
/// label block, a key check value: receivers use it to pick the key to try
/// first without trying them all. It is not secret and not unique; a
/// collision only costs a second decryption attempt. The label block is
/// not the all-zero block, whose encryption is GCM's hash key H
/// (NIST SP 800-38D §6.4).
#[derive(Clone, PartialEq, Eq)]
pub struct Key {
    bytes: [u8; 32],
    id: u8,
}

impl Key {
    /// Wraps 32 octets of key material.
    #[must_use]
    pub fn new(bytes: [u8; 32]) -> Self {
        let aes = Aes256::new(&bytes.into());
        let mut block = KEY_ID_LABEL.into();
        aes.encrypt_block(&mut block);
        Self {
            bytes,
            id: block[0],
        }
    }

    /// Wraps key material from a slice (from a Secret, say).
    ///
    /// # Errors
    /// [`KeyringError::KeyLength`] unless the slice is 32 octets.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, KeyringError> {
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| KeyringError::KeyLength { len: bytes.len() })?;
        Ok(Self::new(bytes))
    }

    /// The key id carried in every encrypted envelope.
    #[must_use]
    pub fn id(&self) -> u8 {
        self.id
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material.
        write!(f, "Key(id={:#04x})", self.id)
    }
}

/// The keys a node accepts; the first is the primary, which encrypts.
#[derive(Clone)]
pub struct Keyring {
    /// Never empty; index 0 is the primary.
    keys: Vec<Entry>,
}

#[derive(Clone)]
struct Entry {
    key: Key,
    cipher: Aes256Gcm,
}

impl Entry {
    fn new(key: Key) -> Self {
        let cipher = Aes256Gcm::new(&key.bytes.into());
        Self { key, cipher }
    }
}

impl Keyring {
    /// A keyring with one key, which is primary.
    #[must_use]
    pub fn new(primary: Key) -> Self {
        Self {
            keys: vec![Entry::new(primary)],
        }
    }

    /// The key that encrypts.
    #[must_use]
    pub fn primary(&self) -> &Key {
        &self.keys[0].key
    }

    /// Every key, the primary first.
    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.keys.iter().map(|e| &e.key)
    }

    /// Accepts `key` for decryption (step 1 of a rotation, on every node).
    /// Installing a key twice changes nothing.
    pub fn install(&mut self, key: Key) {
        if !self.keys.iter().any(|e| e.key == key) {
            self.keys.push(Entry::new(key));
        }
    }

    /// Makes an installed key primary (step 2, once every node has it).
    ///
    /// # Errors
    /// [`KeyringError::NotInstalled`]; the keyring is unchanged.
    pub fn use_key(&mut self, key: &Key) -> Result<(), KeyringError> {
        let i = self
            .keys
            .iter()
            .position(|e| e.key == *key)
            .ok_or(KeyringError::NotInstalled { id: key.id })?;
        // The old primary stays accepted until removed.
        self.keys.swap(0, i);
        Ok(())
    }

    /// Stops accepting a key (step 3, once every node uses the new one).
    ///
    /// # Errors
    /// [`KeyringError::RemovePrimary`] for the primary key,
    /// [`KeyringError::NotInstalled`] for an unknown one; the keyring is
    /// unchanged.
    pub fn remove(&mut self, key: &Key) -> Result<(), KeyringError> {
        if self.keys[0].key == *key {
            return Err(KeyringError::RemovePrimary);
        }
        let i = self
            .keys
            .iter()
            .position(|e| e.key == *key)
            .ok_or(KeyringError::NotInstalled { id: key.id })?;
        self.keys.remove(i);
        Ok(())
    }

    /// The primary cipher and its key id.
    pub(crate) fn encryptor(&self) -> (u8, &Aes256Gcm) {
        (self.keys[0].key.id, &self.keys[0].cipher)
    }

    /// Ciphers whose key id is `id`, the primary first.
    pub(crate) fn decryptors(&self, id: u8) -> impl Iterator<Item = &Aes256Gcm> {
        self.keys
            .iter()
            .filter(move |e| e.key.id == id)
            .map(|e| &e.cipher)
    }
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("primary", self.primary())
            .field("keys", &self.keys.len())
            .finish()
    }
}

/// A keyring operation that was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    /// Key material of the wrong length.
    #[error("AES-256 keys are 32 octets, not {len}")]
    KeyLength {
        /// The rejected length.
        len: usize,
    },
    /// The key is not in the keyring.
    #[error("key {id:#04x} is not installed")]
    NotInstalled {
        /// Its id.
        id: u8,
    },
    /// The primary key cannot be removed; make another key primary first.
    #[error("the primary key cannot be removed")]
    RemovePrimary,
}

/// The block encrypted to derive key ids.
const KEY_ID_LABEL: [u8; 16] = *b"ferrolb key id\0\x01";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation() {
        let a = Key::new([1; 32]);
        let b = Key::new([2; 32]);
        assert_ne!(a.id(), b.id());
        assert_eq!(format!("{a:?}"), format!("Key(id={:#04x})", a.id()));
        let mut ring = Keyring::new(a.clone());
        assert_eq!(ring.remove(&a), Err(KeyringError::RemovePrimary));
        assert_eq!(
            ring.use_key(&b),
            Err(KeyringError::NotInstalled { id: b.id() })
        );
        ring.install(b.clone());
        ring.install(b.clone());
        assert_eq!(ring.keys().count(), 2);
        ring.use_key(&b).unwrap();
        assert_eq!(ring.primary(), &b);
        ring.remove(&a).unwrap();
        assert_eq!(ring.keys().cloned().collect::<Vec<_>>(), vec![b]);
    }

    #[test]
    fn from_slice() {
        assert_eq!(
            Key::from_slice(&[0; 31]),
            Err(KeyringError::KeyLength { len: 31 })
        );
        assert_eq!(Key::from_slice(&[7; 32]).unwrap(), Key::new([7; 32]));
    }
}
