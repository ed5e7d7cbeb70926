//! The OAuth 2 grants of a registry's HTTP sinks, shared: sinks whose
//! grants are the same (one endpoint, client, secret or key, scope,
//! audience and egress rule) hold one, and so one token, fetched once for
//! all of them rather than once each — an authorization server counts and
//! may limit the tokens a client asks for. A registry a reload builds
//! takes the grants of the one it replaces, so a sink rebuilt for another
//! change keeps the token in hand, even while its authorization server is
//! down.

use super::oauth2::ClientCredentials;
use super::registry::SinkRegistry;
use std::collections::HashMap;
use std::sync::Arc;

/// The grants held so far, by token endpoint.
#[derive(Default)]
pub(super) struct Grants {
    by_endpoint: HashMap<String, Vec<Arc<ClientCredentials>>>,
}

impl Grants {
    /// The grants `previous`'s sinks hold.
    pub(super) fn of(previous: &SinkRegistry) -> Grants {
        let mut grants = Grants::default();
        for grant in previous.oauth2_grants() {
            grants.share(grant.clone());
        }
        grants
    }

    /// The grant held that is the same as `grant`, else `grant`, held from
    /// now on.
    pub(super) fn share(&mut self, grant: Arc<ClientCredentials>) -> Arc<ClientCredentials> {
        let held = (self.by_endpoint)
            .entry(grant.token_url().to_string())
            .or_default();
        if let Some(same) = held.iter().find(|h| h.same_grant(&grant)) {
            return same.clone();
        }
        held.push(grant.clone());
        grant
    }
}
