//! Live events: a listener the app implements, fed by a background long-poll, and the handle that stops it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use pacerelle_client::{Cursor, device::Followed};
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;

use crate::conversation::{ConversationItem, ConversationPage};
use crate::error::{PacerelleError, Result};

/// The runtime listeners run on: one worker thread for every listener of the process.
static RUNTIME: LazyLock<std::io::Result<Runtime>> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pacerelle-listener")
        .enable_all()
        .build()
});

/// Receives the conversation as it arrives. Implemented by the app (Kotlin, Swift, Python).
///
/// Called on a background thread, one call at a time, in order. Return quickly (hand the item to the UI
/// thread); an exception thrown here is ignored.
#[uniffi::export(foreign)]
pub trait ConversationListener: Send + Sync {
    /// A new item: a reply, a question, a notification, or a task this device (or another) sent. Keep
    /// `item.cursor` to resume from it after a restart.
    fn on_item(&self, item: ConversationItem) -> Result<()>;

    /// Listening met an error. With `will_retry`, it goes on by itself (the relay was unreachable or busy);
    /// without, it has stopped (for instance `NotPaired`: the device was revoked). Items that did not open
    /// are reported here too, as `Crypto`, and listening goes on.
    fn on_error(&self, error: PacerelleError, will_retry: bool) -> Result<()>;
}

/// Stops a listener. Dropping the handle stops it too.
#[derive(Debug, uniffi::Object)]
pub struct ListenerHandle {
    stopped: Arc<AtomicBool>,
    task: AbortHandle,
}

impl ListenerHandle {
    pub(crate) fn start(
        device: pacerelle_client::DeviceClient,
        cursor: Option<Cursor>,
        listener: Arc<dyn ConversationListener>,
    ) -> Result<Arc<Self>> {
        let runtime = RUNTIME.as_ref().map_err(|e| PacerelleError::Internal {
            reason: format!("cannot start the listener's runtime: {e}"),
        })?;
        let stopped = Arc::new(AtomicBool::new(false));
        let task = runtime
            .spawn(run(device, cursor, listener, stopped.clone()))
            .abort_handle();
        Ok(Arc::new(ListenerHandle { stopped, task }))
    }
}

#[uniffi::export]
impl ListenerHandle {
    /// Stops listening: no call to the listener starts after this returns (one in progress may finish).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.task.abort();
    }

    /// True once stopped, by `stop()` or by an error not worth retrying.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst) || self.task.is_finished()
    }
}

impl Drop for ListenerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Hands the client's [`pacerelle_client::device::Follow`] to the app's listener until stopped or a lasting error.
async fn run(
    device: pacerelle_client::DeviceClient,
    cursor: Option<Cursor>,
    listener: Arc<dyn ConversationListener>,
    stopped: Arc<AtomicBool>,
) {
    let live = || !stopped.load(Ordering::SeqCst);
    let mut follow = device.follow(cursor);
    while live() {
        match follow.next().await {
            Some(Followed::Page(page)) => {
                let page = ConversationPage::from(page);
                for rejected in page.rejected {
                    if live() {
                        let error = PacerelleError::Crypto {
                            reason: format!("item {} did not open: {}", rejected.id, rejected.reason),
                        };
                        let _ = listener.on_error(error, true);
                    }
                }
                for item in page.items {
                    if live() {
                        let _ = listener.on_item(item);
                    }
                }
            }
            Some(Followed::Error { error, retry_in }) => {
                if live() {
                    let _ = listener.on_error(error.into(), retry_in.is_some());
                }
            }
            None => break,
        }
    }
    stopped.store(true, Ordering::SeqCst);
}
