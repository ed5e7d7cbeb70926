//! The credentials a registry's sinks hold, shared: sinks whose tokens or
//! credentials come from the same place hold one holder, so one fetch
//! serves them all rather than one each — an OAuth 2 grant (one endpoint,
//! client, secret or key, scope, audience and egress rule), a Google ID
//! token (one audience and source), a Pub/Sub sink's Google token, AWS
//! credentials (one source and region; the claim check's bucket's too)
//! and a role assumed with them. An authorization server counts and may
//! limit a client's tokens, and the instance metadata services throttle;
//! a hundred sinks would otherwise ask a hundred times, and again at each
//! expiry. A registry a reload builds takes the holders of the one it
//! replaces, so a sink rebuilt for another change keeps the token in
//! hand, even while its issuer is down.

use super::aws_credentials::AwsCredentials;
use super::gcp_id_token::GoogleIdToken;
use super::gcp_token::PubSubAuth;
use super::oauth2::ClientCredentials;
use std::collections::HashMap;
use std::sync::Arc;

/// The holders so far, each kind by what sets its holders apart.
#[derive(Default)]
pub(super) struct SharedCredentials {
    /// By token endpoint.
    oauth2: HashMap<String, Vec<Arc<ClientCredentials>>>,
    /// By audience.
    id_tokens: HashMap<String, Vec<Arc<GoogleIdToken>>>,
    /// Few: a node's Pub/Sub sinks take their token from one place or two.
    pubsub: Vec<Arc<PubSubAuth>>,
    /// By [`AwsCredentials::sharing_key`].
    aws: HashMap<String, Vec<AwsCredentials>>,
}

impl SharedCredentials {
    /// The grant held that is the same as `grant`, else `grant`, held from
    /// now on.
    pub(super) fn oauth2(&mut self, grant: Arc<ClientCredentials>) -> Arc<ClientCredentials> {
        let held = self
            .oauth2
            .entry(grant.token_url().to_string())
            .or_default();
        shared(held, grant, |a, b| a.same_grant(b))
    }

    /// The ID tokens held that are the same as `tokens`, else `tokens`.
    pub(super) fn id_token(&mut self, tokens: Arc<GoogleIdToken>) -> Arc<GoogleIdToken> {
        let held = self
            .id_tokens
            .entry(tokens.audience().to_string())
            .or_default();
        shared(held, tokens, |a, b| a.same_as(b))
    }

    /// The Pub/Sub auth held that takes its token from where `auth` does,
    /// else `auth`.
    pub(super) fn pubsub(&mut self, auth: Arc<PubSubAuth>) -> Arc<PubSubAuth> {
        shared(&mut self.pubsub, auth, |a, b| a.same_source(b))
    }

    /// The AWS credentials held that come from where `credentials` do,
    /// else `credentials`; an assumed role's base credentials are shared
    /// too.
    pub(super) fn aws(&mut self, credentials: AwsCredentials) -> AwsCredentials {
        if let Some(base) = credentials.base() {
            self.aws(base.clone());
        }
        let key = credentials.sharing_key().to_string();
        let held = self.aws.entry(key).or_default();
        shared(held, credentials, |a, b| a.same_source(b))
    }
}

/// The one of `held` that `same` says is as good as `new`, else `new`,
/// held from now on.
fn shared<T: Clone>(held: &mut Vec<T>, new: T, same: impl Fn(&T, &T) -> bool) -> T {
    if let Some(one) = held.iter().find(|one| same(one, &new)) {
        return one.clone();
    }
    held.push(new.clone());
    new
}
