//! Credentials from memory: the principals (agents and devices) found recently, so that an authenticated
//! request reads no row once its principal has been seen. Before, every request read one row for an agent and
//! two for a device, about 15 % of the relay's Tokio time under load.
//!
//! Only principals that exist are kept: an unknown id is read again each time, so a principal created later
//! is found at once and guessed ids fill nothing. Agents' hashes never change and no principal is ever
//! deleted; the one change is a device's revocation, which replaces the device's entry once the revocation is
//! committed. A generation counter, moved on by every such change, keeps a read that began before it from
//! putting the old entry back afterwards. The secret is still compared with the stored hash in constant time
//! on every request ([`crate::auth`]); only the lookup is saved.
//!
//! The cache is per process. Beyond [`MAX_ENTRIES`] it is emptied and refills with the principals in use.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::store::Principal;

/// Principals kept at most (about 150 bytes each).
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Default)]
struct State {
    by_id: HashMap<String, Principal>,
    /// Moved on by every change to a principal; a lookup read from the database before a change is not kept.
    generation: u64,
}

/// The principals found recently, by id.
#[derive(Debug, Default)]
pub(super) struct Principals {
    state: RwLock<State>,
}

/// Where a lookup stands: the principal from memory, or the generation to hand back to [`Principals::keep`]
/// with what the database said.
pub(super) enum Cached {
    Hit(Principal),
    Miss { generation: u64 },
}

impl Principals {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The principal named `id` if it is in memory.
    pub(super) fn get(&self, id: &str) -> Cached {
        let state = self.read();
        match state.by_id.get(id) {
            Some(principal) => Cached::Hit(principal.clone()),
            None => Cached::Miss {
                generation: state.generation,
            },
        }
    }

    /// Keeps what the database said about `id`, unless a principal changed since the lookup's `generation`
    /// was taken (the row read may predate that change).
    pub(super) fn keep(&self, id: &str, principal: &Principal, generation: u64) {
        let mut state = self.write();
        if state.generation != generation {
            return;
        }
        if state.by_id.len() >= MAX_ENTRIES {
            state.by_id.clear();
        }
        state.by_id.insert(id.to_string(), principal.clone());
    }

    /// Forgets `id` after a committed change to it (a revocation): the next lookup reads the database.
    pub(super) fn changed(&self, id: &str) {
        let mut state = self.write();
        state.generation = state.generation.wrapping_add(1);
        state.by_id.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(revoked: bool) -> Principal {
        Principal::Device {
            agent_id: "agt".into(),
            device_id: "dev".into(),
            hash: vec![7; 32],
            revoked,
        }
    }

    fn revoked(cached: Cached) -> Option<bool> {
        match cached {
            Cached::Hit(Principal::Device { revoked, .. }) => Some(revoked),
            _ => None,
        }
    }

    #[test]
    fn a_lookup_is_kept_and_a_change_forgets_it() {
        let cache = Principals::default();
        let Cached::Miss { generation } = cache.get("dev") else {
            panic!("empty at first");
        };
        cache.keep("dev", &device(false), generation);
        assert_eq!(revoked(cache.get("dev")), Some(false));
        cache.changed("dev");
        assert!(matches!(cache.get("dev"), Cached::Miss { .. }));
    }

    #[test]
    fn a_read_from_before_a_revocation_is_not_put_back() {
        let cache = Principals::default();
        // A request reads the device, not yet revoked…
        let Cached::Miss { generation } = cache.get("dev") else {
            panic!("empty at first");
        };
        // …while its revocation commits and is announced…
        cache.changed("dev");
        // …then the request hands back its stale row: it must not be kept.
        cache.keep("dev", &device(false), generation);
        let Cached::Miss { generation } = cache.get("dev") else {
            panic!("the stale row was kept");
        };
        cache.keep("dev", &device(true), generation);
        assert_eq!(revoked(cache.get("dev")), Some(true));
    }

    #[test]
    fn the_cache_stays_bounded() {
        let cache = Principals::default();
        for i in 0..=MAX_ENTRIES {
            let id = format!("dev{i}");
            if let Cached::Miss { generation } = cache.get(&id) {
                cache.keep(&id, &device(false), generation);
            }
        }
        assert!(cache.read().by_id.len() <= MAX_ENTRIES);
        assert!(matches!(cache.get(&format!("dev{MAX_ENTRIES}")), Cached::Hit(_)));
    }
}
