//! The Python binding of Pacerelle: the native module `pacerelle._native` behind the `pacerelle` package.
//!
//! A thin layer over `pacerelle-client`: every method that talks to the relay returns a [`Call`], a future
//! not yet started. `Call.wait()` runs it on the one tokio runtime with the GIL released, checking for
//! signals every 100 ms so that Ctrl-C interrupts it; `Call.start(callback)` runs it in the background and
//! hands the result to `callback` (the asyncio API, in `python/pacerelle/_bridge.py`, resolves an asyncio
//! future with it, and cancelling the asyncio task drops the Rust future). The Python package builds
//! `Agent`, `AsyncAgent`, `Device`, the run loop and the approval decorator on these primitives.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

mod agent;
mod convert;
mod device;
mod errors;
mod policy;
mod types;
mod webhook;

use errors::to_py_err;
use types::ToPy;

/// How often a blocking call checks for signals (Ctrl-C).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        #[allow(clippy::expect_used)] // without a runtime nothing in the module can work
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("pacerelle")
            .enable_all()
            .build()
            .expect("the tokio runtime could not start")
    })
}

/// Turns a finished call's outcome into a Python value; run once the caller holds the GIL.
type Convert = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;
type Boxed = Pin<Box<dyn Future<Output = Convert> + Send>>;

/// A call to the relay, not yet started: `wait()` blocks for it, `start(callback)` runs it in the background.
#[pyclass(frozen, module = "pacerelle._native")]
pub(crate) struct Call {
    future: Mutex<Option<Boxed>>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}

impl Call {
    /// Wraps a client future; its error goes through [`to_py_err`], its value through [`ToPy`], both only
    /// once the GIL is held (never from inside the runtime).
    pub(crate) fn new<T, F>(future: F) -> Call
    where
        T: ToPy,
        F: Future<Output = pacerelle_client::Result<T>> + Send + 'static,
    {
        Call {
            future: Mutex::new(Some(Box::pin(async move {
                let out = future.await;
                Box::new(move |py: Python<'_>| match out {
                    Ok(value) => value.to_py(py),
                    Err(e) => Err(to_py_err(e)),
                }) as Convert
            }))),
        }
    }

    /// [`Call::new`] of the future `call` makes from a clone of `client` (an `AgentClient`, a `DeviceClient`,
    /// both cheap to clone), so that the future owns what it uses.
    pub(crate) fn with<C, T, F>(client: &C, call: impl FnOnce(C) -> F) -> Call
    where
        C: Clone,
        T: ToPy,
        F: Future<Output = pacerelle_client::Result<T>> + Send + 'static,
    {
        Call::new(call(client.clone()))
    }

    fn take(&self) -> PyResult<Boxed> {
        self.future
            .lock()
            .ok()
            .and_then(|mut f| f.take())
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("this call was already started"))
    }
}

#[pymethods]
impl Call {
    /// Runs the call with the GIL released and returns its result. Signals are checked every 100 ms, so
    /// Ctrl-C raises KeyboardInterrupt promptly (the request is abandoned). When `cancel` is cancelled
    /// first, returns None.
    #[pyo3(signature = (cancel = None))]
    fn wait(&self, py: Python<'_>, cancel: Option<&CancelToken>) -> PyResult<Py<PyAny>> {
        let future = self.take()?;
        let token = cancel.map(|c| c.token.clone());
        let finished: PyResult<Option<Convert>> = py.detach(move || {
            runtime().block_on(async move {
                let mut future = future;
                let cancelled = async {
                    match &token {
                        Some(t) => t.cancelled().await,
                        None => std::future::pending().await,
                    }
                };
                tokio::pin!(cancelled);
                let start = tokio::time::Instant::now() + SIGNAL_CHECK;
                let mut tick = tokio::time::interval_at(start, SIGNAL_CHECK);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        biased;
                        convert = &mut future => return Ok(Some(convert)),
                        _ = &mut cancelled => return Ok(None),
                        // Runs Python's signal handlers: Ctrl-C's KeyboardInterrupt ends the wait.
                        _ = tick.tick() => Python::attach(|py| py.check_signals())?,
                    }
                }
            })
        });
        match finished? {
            Some(convert) => convert(py),
            None => Ok(py.None()),
        }
    }

    /// Runs the call in the background; `callback(ok, value)` is called from another thread when it ends,
    /// with `(True, result)` or `(False, exception)`. Returns a handle whose `cancel()` drops the call (the
    /// callback is then never called).
    fn start(&self, callback: Py<PyAny>) -> PyResult<TaskHandle> {
        let future = self.take()?;
        let handle = runtime().spawn(async move {
            let convert = future.await;
            // At interpreter shutdown there is nobody left to tell.
            Python::try_attach(|py| {
                let args = match convert(py) {
                    Ok(value) => (true, value),
                    Err(e) => (false, e.into_value(py).into_any()),
                };
                if let Err(e) = callback.call1(py, args) {
                    e.print(py);
                }
            });
        });
        Ok(TaskHandle {
            abort: handle.abort_handle(),
        })
    }
}

/// A call running in the background.
#[pyclass(frozen, module = "pacerelle._native")]
#[derive(Debug)]
pub(crate) struct TaskHandle {
    abort: tokio::task::AbortHandle,
}

#[pymethods]
impl TaskHandle {
    /// Drops the call: its request is abandoned and its callback never called.
    fn cancel(&self) {
        self.abort.abort();
    }

    /// True once the call ended or was cancelled.
    fn done(&self) -> bool {
        self.abort.is_finished()
    }
}

/// Stops a `Call.wait(cancel=…)` from any thread (the run loop's `stop()`).
#[pyclass(frozen, module = "pacerelle._native")]
#[derive(Debug, Default)]
pub(crate) struct CancelToken {
    token: CancellationToken,
}

#[pymethods]
impl CancelToken {
    #[new]
    fn new() -> Self {
        CancelToken::default()
    }

    /// Cancels: waits given this token return None at once, and so do later ones.
    fn cancel(&self) {
        self.token.cancel();
    }

    /// True once cancelled.
    #[getter]
    fn cancelled(&self) -> bool {
        self.token.is_cancelled()
    }
}

#[pymodule]
mod _native {
    #[pymodule_export]
    use super::agent::{AgentClient, RunLog, RunLoop, RunTask};
    #[pymodule_export]
    use super::device::DeviceClient;
    #[pymodule_export]
    use super::policy::{PyEvaluation, PyPolicy, PyRuling};
    #[pymodule_export]
    use super::types::verify_answer_log;
    #[pymodule_export]
    use super::types::{
        PyAgentInfo, PyAnswerOutcome, PyAsked, PyAuditEntry, PyCheckpoint, PyConversationItem,
        PyConversationPage, PyDelivery, PyDeviceCredentials, PyDeviceInfo, PyDeviceSelf, PyInbox,
        PyLeaseHolder, PyMessage, PyPairingLink, PyProcessed, PyQuestion, PyQuestionList, PyRejected,
        PySessionInfo, PySessionSummary, PyStatus, PyStored, PyUser, PyUserDevice, PyWebhookEvent,
        PyWebhookInfo,
    };
    #[pymodule_export]
    use super::webhook::{sign_webhook, verify_webhook};
    #[pymodule_export]
    use super::{Call, CancelToken, TaskHandle};

    use pyo3::prelude::*;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        super::errors::register(m)?;
        super::types::register_audit(m)?;
        m.add("DEFAULT_RELAY_URL", pacerelle_client::DEFAULT_RELAY_URL)?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        Ok(())
    }
}
