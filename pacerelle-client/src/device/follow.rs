//! Following a device's conversation as it arrives: the one loop behind the CLI's `inbox --follow` and the
//! mobile SDK's listener. Long-polls of up to [`FOLLOW_WAIT`]; after an error worth retrying
//! ([`Error::is_transient`]: the relay unreachable, busy or restarting) a pause by the client's one
//! [`Backoff`], from the start again once a page arrives; any other error ends the following.

use std::time::Duration;

use pacerelle_core::Cursor;

use crate::backoff::Backoff;
use crate::device::{ConversationPage, DeviceClient};
use crate::error::Error;

/// Longest park of one long-poll while following.
pub const FOLLOW_WAIT: Duration = Duration::from_secs(30);

/// What following yields, one at a time.
#[derive(Debug)]
pub enum Followed {
    /// New items (maybe none: a park that ended with nothing new). The cursor is already kept.
    Page(ConversationPage),
    /// A call failed. With `retry_in`, the next [`Follow::next`] pauses that long, then goes on; without,
    /// following has ended and `next` returns `None`.
    Error {
        error: Error,
        retry_in: Option<Duration>,
    },
}

/// A device's conversation followed from a cursor. Made by [`DeviceClient::follow`].
pub struct Follow {
    device: DeviceClient,
    cursor: Option<Cursor>,
    backoff: Backoff,
    delays: Box<dyn Iterator<Item = Duration> + Send>,
    pause: Option<Duration>,
    ended: bool,
}

impl std::fmt::Debug for Follow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follow")
            .field("cursor", &self.cursor)
            .field("pause", &self.pause)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl DeviceClient {
    /// Follows the conversation after `cursor` (from the start when `None`).
    pub fn follow(&self, cursor: Option<Cursor>) -> Follow {
        let backoff = Backoff::default();
        Follow {
            device: self.clone(),
            cursor,
            delays: Box::new(backoff.delays()),
            backoff,
            pause: None,
            ended: false,
        }
    }
}

impl Follow {
    /// Pauses after an error worth retrying by `backoff` instead of [`Backoff::default`].
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.delays = Box::new(backoff.delays());
        self.backoff = backoff;
        self
    }

    /// Where the next read starts: the cursor after the last page.
    pub fn cursor(&self) -> Option<Cursor> {
        self.cursor
    }

    /// The next page, or the next error; `None` once an error not worth retrying was returned. Cancel-safe
    /// at every await: dropping the future loses nothing the caller was given.
    pub async fn next(&mut self) -> Option<Followed> {
        if self.ended {
            return None;
        }
        if let Some(pause) = self.pause {
            tokio::time::sleep(pause).await;
            self.pause = None;
        }
        match self.device.conversation(self.cursor, FOLLOW_WAIT).await {
            Ok(page) => {
                self.delays = Box::new(self.backoff.delays());
                self.cursor = Some(page.cursor);
                Some(Followed::Page(page))
            }
            Err(error) if error.is_transient() => {
                let pause = self.delays.next().unwrap_or(self.backoff.max);
                self.pause = Some(pause);
                Some(Followed::Error {
                    error,
                    retry_in: Some(pause),
                })
            }
            Err(error) => {
                self.ended = true;
                Some(Followed::Error {
                    error,
                    retry_in: None,
                })
            }
        }
    }
}
