//! The memberlist Secret: MetalLB's controller creates it when it is
//! missing (`--ml-secret-name`, key `secretkey`), so a fresh install needs
//! no manual step; ferrolb's does the same, in the same shape, so the
//! speakers' Secret volume mounts and a MetalLB speaker could read it too.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use rand::TryRngCore as _;
use rand::rngs::OsRng;
use tracing::{debug, info};

/// The Secret's data key, as MetalLB names it.
pub const KEY: &str = "secretkey";

/// What [`ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The Secret was there already; it is left as it is.
    Exists,
    /// It was created.
    Created,
}

/// Why the Secret could not be ensured.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("memberlist secret {name}: {source}")]
    Kube {
        /// The Secret's name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The system has no randomness to give.
    #[error("memberlist secret: no random bytes: {0}")]
    Random(String),
}

/// A new key as MetalLB makes one: 16 random octets (128 bits), base64
/// without padding. The speakers use it as a passphrase (its SHA-256 is
/// the AES-256 key; `speaker::source::keyring`).
///
/// # Errors
/// When the operating system's random source fails.
pub fn new_key() -> Result<String, Error> {
    let mut key = [0u8; 16];
    OsRng
        .try_fill_bytes(&mut key)
        .map_err(|e| Error::Random(e.to_string()))?;
    Ok(STANDARD_NO_PAD.encode(key))
}

/// Creates the Secret `name` in `namespace` with a new key when no Secret
/// of that name exists, owned by the controller Deployment `deployment`
/// when one is named (so it goes with the install). An existing Secret is
/// never changed: rotating it is the user's decision.
///
/// # Errors
/// When the API refuses a call. The controller's role needs `create` on
/// Secrets and either `get` on this one (ferrolb's role, which grants no
/// other Secret) or `list` on Secrets (MetalLB's), and `get` on its
/// Deployment when one is named.
pub async fn ensure(
    client: &Client,
    namespace: &str,
    name: &str,
    deployment: Option<&str>,
) -> Result<Outcome, Error> {
    let err = |source| Error::Kube {
        name: name.to_owned(),
        source,
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let exists = match secrets.get_opt(name).await {
        Ok(found) => found.is_some(),
        // MetalLB's role grants `list` on Secrets, not `get`: a list by
        // name, where an absent Secret is an empty list.
        Err(kube::Error::Api(e)) if e.code == 403 => !secrets
            .list(&ListParams::default().fields(&format!("metadata.name={name}")))
            .await
            .map_err(err)?
            .items
            .is_empty(),
        Err(e) => return Err(err(e)),
    };
    if exists {
        debug!(secret = name, "memberlist secret exists");
        return Ok(Outcome::Exists);
    }
    let owner = match deployment.filter(|d| !d.is_empty()) {
        Some(d) => {
            let dep = Api::<Deployment>::namespaced(client.clone(), namespace)
                .get(d)
                .await
                .map_err(err)?;
            dep.metadata.uid.map(|uid| OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: d.to_owned(),
                uid,
                ..OwnerReference::default()
            })
        }
        None => None,
    };
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        data: Some(
            [(KEY.to_owned(), ByteString(new_key()?.into_bytes()))]
                .into_iter()
                .collect(),
        ),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            info!(secret = name, "memberlist secret created");
            Ok(Outcome::Created)
        }
        // Another replica made it between our list and our create.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Outcome::Exists),
        Err(e) => Err(err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_metallb_shaped_and_differ() {
        let a = new_key().unwrap();
        let b = new_key().unwrap();
        assert_eq!(a.len(), 22, "{a}");
        assert_ne!(a, b);
        assert_eq!(STANDARD_NO_PAD.decode(&a).unwrap().len(), 16);
    }
}
