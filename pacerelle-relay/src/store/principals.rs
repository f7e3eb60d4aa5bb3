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
//! With several instances on PostgreSQL, a revocation committed by one instance reaches the others' caches by
//! `NOTIFY` (`store/postgres/wakes.rs`); each instance empties its cache whenever it starts listening (a
//! revocation may have passed meanwhile) and keeps an entry at most [`Principals::with_max_age`], so that a
//! listener that lost its connection without knowing it cannot keep a revoked device in for long.

use std::collections::HashMap;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use crate::store::Principal;

/// Principals kept at most (about 150 bytes each).
const MAX_ENTRIES: usize = 100_000;

#[derive(Debug, Default)]
struct State {
    by_id: HashMap<String, (Principal, Instant)>,
    /// Moved on by every change to a principal; a lookup read from the database before a change is not kept.
    generation: u64,
}

/// The principals found recently, by id.
#[derive(Debug, Default)]
pub(crate) struct Principals {
    state: RwLock<State>,
    /// How long an entry is used before it is read again; `None`: until it changes.
    max_age: Option<Duration>,
}

/// Where a lookup stands: the principal from memory, or the generation to hand back to [`Principals::keep`]
/// with what the database said.
pub(crate) enum Cached {
    Hit(Principal),
    Miss { generation: u64 },
}

impl Principals {
    /// A cache whose entries are read again from the database once they are `max_age` old.
    pub(crate) fn with_max_age(max_age: Duration) -> Self {
        Principals {
            state: Default::default(),
            max_age: Some(max_age),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The principal named `id` if it is in memory.
    pub(crate) fn get(&self, id: &str) -> Cached {
        let state = self.read();
        match state.by_id.get(id) {
            Some((principal, kept)) if self.max_age.is_none_or(|age| kept.elapsed() < age) => {
                Cached::Hit(principal.clone())
            }
            _ => Cached::Miss {
                generation: state.generation,
            },
        }
    }

    /// Keeps what the database said about `id`, unless a principal changed since the lookup's `generation`
    /// was taken (the row read may predate that change).
    pub(crate) fn keep(&self, id: &str, principal: &Principal, generation: u64) {
        let mut state = self.write();
        if state.generation != generation {
            return;
        }
        if state.by_id.len() >= MAX_ENTRIES {
            state.by_id.clear();
        }
        state
            .by_id
            .insert(id.to_string(), (principal.clone(), Instant::now()));
    }

    /// Forgets `id` after a committed change to it (a revocation): the next lookup reads the database.
    pub(crate) fn changed(&self, id: &str) {
        let mut state = self.write();
        state.generation = state.generation.wrapping_add(1);
        state.by_id.remove(id);
    }

    /// Forgets every principal (changes may have been missed): each next lookup reads the database.
    pub(crate) fn clear(&self) {
        let mut state = self.write();
        state.generation = state.generation.wrapping_add(1);
        state.by_id.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(revoked: bool) -> Principal {
        Principal::Device {
            agent_id: "agt".into(),
            device_id: "dev".into(),
            role: pacerelle_core::pairing::Role::Owner,
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
    fn an_entry_older_than_the_max_age_and_a_cleared_cache_are_read_again() {
        let cache = Principals::with_max_age(Duration::from_millis(50));
        let Cached::Miss { generation } = cache.get("dev") else {
            panic!("empty at first");
        };
        cache.keep("dev", &device(false), generation);
        assert_eq!(revoked(cache.get("dev")), Some(false));
        std::thread::sleep(Duration::from_millis(60));
        let Cached::Miss { generation } = cache.get("dev") else {
            panic!("an old entry is read again");
        };
        cache.keep("dev", &device(false), generation);
        // A read begun before a clear is not kept after it.
        let Cached::Hit(_) = cache.get("dev") else {
            panic!("kept");
        };
        let Cached::Miss { generation } = cache.get("other") else {
            panic!("unknown");
        };
        cache.clear();
        assert!(matches!(cache.get("dev"), Cached::Miss { .. }));
        cache.keep("other", &device(false), generation);
        assert!(matches!(cache.get("other"), Cached::Miss { .. }));
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
