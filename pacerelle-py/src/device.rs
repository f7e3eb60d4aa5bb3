//! `pacerelle._native.DeviceClient`: the device side (a phone, or a test or bot playing one).

use pacerelle_client::{Cursor, QuestionState, device::DeviceCredentials};
use pyo3::prelude::*;

use crate::Call;
use crate::convert::{answer_arg, seconds};
use crate::errors::{invalid, to_py_err};
use crate::types::{PyDeviceCredentials, ToPy};

/// The device's native client. Every relay call returns a `Call`.
#[pyclass(frozen, module = "pacerelle._native")]
#[derive(Debug)]
pub(crate) struct DeviceClient {
    inner: pacerelle_client::DeviceClient,
}

impl ToPy for DeviceClient {
    fn to_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(Py::new(py, self)?.into_any())
    }
}

#[pymethods]
impl DeviceClient {
    /// Joins an agent by opening its pairing link. Returns a Call of DeviceClient.
    #[staticmethod]
    fn join(link: String, name: String) -> Call {
        Call::new(async move {
            pacerelle_client::DeviceClient::join(&link, &name)
                .await
                .map(|inner| DeviceClient { inner })
        })
    }

    /// A client from stored credentials: a DeviceCredentials or its `pcrdev1_…` string.
    #[staticmethod]
    fn from_credentials(credentials: &Bound<'_, PyAny>) -> PyResult<Self> {
        let creds: DeviceCredentials = match credentials.cast::<PyDeviceCredentials>() {
            Ok(c) => c.get().inner.clone(),
            Err(_) => {
                let text: String = credentials
                    .extract()
                    .map_err(|_| invalid("credentials are a DeviceCredentials or a pcrdev1_… string"))?;
                DeviceCredentials::from_secret_string(&text).map_err(to_py_err)?
            }
        };
        pacerelle_client::DeviceClient::from_credentials(creds)
            .map(|inner| DeviceClient { inner })
            .map_err(to_py_err)
    }

    #[getter]
    fn credentials(&self) -> PyDeviceCredentials {
        PyDeviceCredentials {
            inner: self.inner.credentials_to_store(),
        }
    }

    /// The fingerprint of this device's signing key (six groups of four hex digits), to compare with the one
    /// an answer-log export names; `None` for a device paired before signing keys.
    #[getter]
    fn signing_fingerprint(&self) -> Option<String> {
        self.inner.signing_fingerprint()
    }

    #[pyo3(signature = (text, message_id = None, session = None))]
    fn send(&self, text: String, message_id: Option<String>, session: Option<String>) -> Call {
        Call::with(&self.inner, move |c| async move {
            c.send_to(&text, message_id.as_deref(), session.as_deref()).await
        })
    }

    #[pyo3(signature = (cursor = None, timeout = 0.0))]
    fn conversation(&self, cursor: Option<&str>, timeout: f64) -> PyResult<Call> {
        let cursor = cursor
            .map(|c| Cursor::parse(c).map_err(|e| to_py_err(e.into())))
            .transpose()?;
        let wait = seconds("timeout", timeout)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.conversation(cursor, wait).await
        }))
    }

    #[pyo3(signature = (state = None))]
    fn questions(&self, state: Option<&str>) -> PyResult<Call> {
        let state = state
            .map(|s| {
                QuestionState::parse(s)
                    .ok_or_else(|| invalid("state is 'pending', 'answered', 'expired' or 'cancelled'"))
            })
            .transpose()?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.questions(state).await
        }))
    }

    fn answer(&self, question_id: String, answer: &Bound<'_, PyAny>) -> PyResult<Call> {
        let answer = answer_arg(answer)?;
        Ok(Call::with(&self.inner, move |c| async move {
            c.answer(&question_id, answer).await
        }))
    }

    fn status(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.status().await })
    }

    fn info(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.info().await })
    }

    fn leave(&self) -> Call {
        Call::with(&self.inner, move |c| async move { c.leave().await })
    }

    fn __repr__(&self) -> String {
        let creds = self.inner.credentials();
        format!(
            "DeviceClient(relay_url={}, agent_id={}, device_id={})",
            crate::convert::r(&creds.relay_url),
            crate::convert::r(&creds.agent_id),
            crate::convert::r(&creds.device_id)
        )
    }
}
