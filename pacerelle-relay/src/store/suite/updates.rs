//! State changes as conversation items (kind `update`): one per subject and state, only those that make sense
//! — on each backend.

use pacerelle_core::Timestamp;
use pacerelle_core::wire::{ItemState, SubjectKind};

use super::messages::two_agents;
use super::{T0, backends};
use crate::store::{Put, seq_of};

#[tokio::test]
async fn one_update_per_subject_and_state_and_only_those_that_make_sense() {
    for backend in backends().await {
        let name = backend.name();
        let store = &two_agents(&backend).await;
        let put = store
            .put_message("ag_1", "dv_1", "m1", "AQID", None, u32::MAX, Timestamp(T0))
            .await
            .expect("stored");
        let Put::Stored(task) = put else {
            panic!("{name}: stored")
        };
        let seq = seq_of(task.cursor);

        // A task is processed, never answered; an unknown seq, or another agent's, is no subject.
        assert!(
            backend.insert_update(seq, ItemState::Answered).await.is_none(),
            "{name}"
        );
        assert!(
            backend
                .insert_update(seq + 100, ItemState::Processed)
                .await
                .is_none(),
            "{name}"
        );
        let Put::Stored(other) = store
            .put_message("ag_2", "dv_3", "m1", "AQ", None, u32::MAX, Timestamp(T0))
            .await
            .expect("stored")
        else {
            panic!("{name}: stored")
        };
        assert!(
            backend
                .insert_update(seq_of(other.cursor), ItemState::Processed)
                .await
                .is_none(),
            "{name}"
        );
        let first = backend
            .insert_update(seq, ItemState::Processed)
            .await
            .expect("stored");
        assert_eq!(first.subject_id, "m1", "{name}");
        assert_eq!(first.subject_kind, SubjectKind::Message, "{name}");
        assert_eq!(first.recipients, ["dv_1"], "{name}");
        assert!(first.seq > seq, "{name}");
        assert!(first.id.starts_with("upd_"), "{name}");
        assert!(
            backend.insert_update(seq, ItemState::Processed).await.is_none(),
            "{name}: a second update for the same subject and state is not stored"
        );
        // The item a push would carry is the one the conversation returns.
        let (items, _) = store
            .conversation("ag_1", "dv_1", task.cursor, 10, true, Timestamp(T0 + 1))
            .await
            .expect("reads");
        assert_eq!(items, std::slice::from_ref(&first.item), "{name}");
        assert_eq!(
            backend
                .count("SELECT COUNT(*) FROM items WHERE kind = 'update'")
                .await,
            1,
            "{name}"
        );
    }
}
