//! `--relay` on a device command overrides the relay URL stored in `device.json`, as it does the agent's.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use crate::common;

use common::{Setup, run, stderr};

#[tokio::test]
async fn relay_overrides_the_stored_url_on_device_commands() {
    let s = Setup::start().await;
    // The stored URL now names a port where nothing listens.
    let path = s.device_home.path().join("device.json");
    let mut creds: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    creds["relayUrl"] = "http://127.0.0.1:9".into();
    std::fs::write(&path, creds.to_string()).unwrap();

    // Without --relay (nor the variable), the stored URL is used: unreachable.
    let out = run({
        let mut c = s.as_device();
        c.env_remove("PACERELLE_RELAY_URL").args(["send", "hi"]);
        c
    });
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unreachable"), "{}", stderr(&out));

    // With --relay, the given one.
    let out = run({
        let mut c = s.as_device();
        c.env_remove("PACERELLE_RELAY_URL")
            .args(["send", "hi", "--relay", &s.url]);
        c
    });
    assert!(out.status.success(), "{}", stderr(&out));
    let page = s
        .device
        .conversation(None, std::time::Duration::ZERO)
        .await
        .expect("conversation");
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].text, "hi");

    // And the other way round: a wrong --relay is used, not silently replaced by the stored one.
    std::fs::write(&path, {
        creds["relayUrl"] = s.url.clone().into();
        creds.to_string()
    })
    .unwrap();
    let out = run({
        let mut c = s.as_device();
        c.args(["inbox", "--relay", "http://127.0.0.1:9"]);
        c
    });
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("unreachable"), "{}", stderr(&out));
}
