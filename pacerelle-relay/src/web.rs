//! The phone web app (`web/`), embedded in the binary and served at `/`, `/pair` and `/app/…`.
//!
//! Static files only: no build step, nothing fetched from elsewhere. Every answer carries a strict
//! Content-Security-Policy (scripts and styles from this origin only, no inline script, requests to this
//! origin only), `nosniff`, `no-referrer` (the pairing page's fragment never leaves the page anyway), and is
//! revalidated on each load (`no-cache` with an `ETag`), so that a relay upgrade serves the new app at once.
//!
//! The service worker (`/app/sw.js`, a module) is served with `Service-Worker-Allowed: /`: its scope is the whole
//! app although its script lives under `/app/`.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// The policy of every page and file of the web app.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'";

/// One embedded file.
struct Asset {
    /// Its name under `/app/`.
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
    /// FNV-1a of the body, computed at compile time: the `ETag`.
    tag: u64,
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {{
        const BODY: &[u8] = include_bytes!(concat!("../web/app/", $name));
        Asset {
            name: $name,
            content_type: $content_type,
            body: BODY,
            tag: fnv1a(BODY),
        }
    }};
}

const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The service worker's script, the one file that may control pages outside `/app/`.
const SERVICE_WORKER: &str = "sw.js";

/// The files under `/app/`.
const ASSETS: &[Asset] = &[
    asset!("app.js", JS),
    asset!("state.js", JS),
    asset!("dom.js", JS),
    asset!("format.js", JS),
    asset!("screens.js", JS),
    asset!("partner.js", JS),
    asset!("pairing.js", JS),
    asset!("conversation.js", JS),
    asset!("thread.js", JS),
    asset!("questions-ui.js", JS),
    asset!("sending.js", JS),
    asset!("agents.js", JS),
    asset!("watch.js", JS),
    asset!("activity.js", JS),
    asset!("names.js", JS),
    asset!("drafts.js", JS),
    asset!("settings.js", JS),
    asset!("api.js", JS),
    asset!("crypto.js", JS),
    asset!("store.js", JS),
    asset!("answer.js", JS),
    asset!("grant.js", JS),
    asset!("grant-ui.js", JS),
    asset!("details.js", JS),
    asset!("approvals.js", JS),
    asset!("approvals-ui.js", JS),
    asset!("push.js", JS),
    asset!("backoff.js", JS),
    asset!("sw.js", JS),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("manifest.webmanifest", "application/manifest+json"),
    asset!("icon.svg", SVG),
    asset!("icon-maskable.svg", SVG),
];

/// The one page, for `/` (the conversation) and `/pair` (pairing, from the link's fragment).
const INDEX: Asset = {
    const BODY: &[u8] = include_bytes!("../web/index.html");
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: BODY,
        tag: fnv1a(BODY),
    }
};

/// 64-bit FNV-1a, at compile time.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// The web app's routes, merged into the relay's router.
pub(crate) fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/pair", get(index))
        .route("/app/{name}", get(file))
}

async fn index(request: HeaderMap) -> Response {
    serve(&INDEX, &request)
}

async fn file(Path(name): Path<String>, request: HeaderMap) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => serve(asset, &request),
        None => {
            let mut response = (StatusCode::NOT_FOUND, "not found\n").into_response();
            security_headers(response.headers_mut());
            response
        }
    }
}

fn security_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        "permissions-policy",
        HeaderValue::from_static("camera=(), microphone=(), geolocation=(), payment=(), usb=()"),
    );
}

fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let etag = format!("\"{:016x}\"", asset.tag);
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    if asset.name == SERVICE_WORKER {
        headers.insert("service-worker-allowed", HeaderValue::from_static("/"));
    }
    security_headers(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(path: &str, etag: Option<&str>) -> Response {
        let mut request = Request::builder().uri(path);
        if let Some(tag) = etag {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        routes::<()>()
            .oneshot(request.body(Body::empty()).expect("request"))
            .await
            .expect("infallible")
    }

    fn header<'a>(response: &'a Response, name: &str) -> &'a str {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn pages_and_files_carry_the_policy_and_their_type() {
        for (path, content_type) in [
            ("/", "text/html; charset=utf-8"),
            ("/pair", "text/html; charset=utf-8"),
            ("/app/app.js", "text/javascript; charset=utf-8"),
            ("/app/state.js", "text/javascript; charset=utf-8"),
            ("/app/dom.js", "text/javascript; charset=utf-8"),
            ("/app/format.js", "text/javascript; charset=utf-8"),
            ("/app/screens.js", "text/javascript; charset=utf-8"),
            ("/app/partner.js", "text/javascript; charset=utf-8"),
            ("/app/pairing.js", "text/javascript; charset=utf-8"),
            ("/app/conversation.js", "text/javascript; charset=utf-8"),
            ("/app/thread.js", "text/javascript; charset=utf-8"),
            ("/app/questions-ui.js", "text/javascript; charset=utf-8"),
            ("/app/sending.js", "text/javascript; charset=utf-8"),
            ("/app/agents.js", "text/javascript; charset=utf-8"),
            ("/app/watch.js", "text/javascript; charset=utf-8"),
            ("/app/activity.js", "text/javascript; charset=utf-8"),
            ("/app/names.js", "text/javascript; charset=utf-8"),
            ("/app/drafts.js", "text/javascript; charset=utf-8"),
            ("/app/settings.js", "text/javascript; charset=utf-8"),
            ("/app/crypto.js", "text/javascript; charset=utf-8"),
            ("/app/answer.js", "text/javascript; charset=utf-8"),
            ("/app/push.js", "text/javascript; charset=utf-8"),
            ("/app/sw.js", "text/javascript; charset=utf-8"),
            ("/app/style.css", "text/css; charset=utf-8"),
            ("/app/manifest.webmanifest", "application/manifest+json"),
            ("/app/icon.svg", "image/svg+xml"),
        ] {
            let response = get(path, None).await;
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert_eq!(header(&response, "content-type"), content_type, "{path}");
            assert_eq!(
                header(&response, "content-security-policy"),
                CONTENT_SECURITY_POLICY
            );
            assert_eq!(header(&response, "x-content-type-options"), "nosniff");
            assert_eq!(header(&response, "referrer-policy"), "no-referrer");
            assert_eq!(header(&response, "cache-control"), "no-cache");
            assert!(header(&response, "etag").starts_with('"'), "{path}");
        }
        assert_eq!(
            header(&get("/app/sw.js", None).await, "service-worker-allowed"),
            "/"
        );
        assert_eq!(
            header(&get("/app/app.js", None).await, "service-worker-allowed"),
            ""
        );
        let missing = get("/app/nothing.js", None).await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        assert_eq!(header(&missing, "x-content-type-options"), "nosniff");
    }

    #[tokio::test]
    async fn an_unchanged_file_is_not_sent_again() {
        let first = get("/app/app.js", None).await;
        let etag = header(&first, "etag").to_string();
        let again = get("/app/app.js", Some(&etag)).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(header(&again, "content-security-policy"), CONTENT_SECURITY_POLICY);
        let other = get("/app/app.js", Some("\"0\"")).await;
        assert_eq!(other.status(), StatusCode::OK);
    }

    #[test]
    fn the_policy_is_strict() {
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
            "form-action 'none'",
        ] {
            assert!(CONTENT_SECURITY_POLICY.contains(directive), "{directive}");
        }
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }

    /// Everything the page loads is embedded, nothing is inline, nothing comes from another origin.
    #[test]
    fn the_page_loads_only_embedded_files() {
        let html = std::str::from_utf8(INDEX.body).expect("utf-8");
        let mut referenced = 0;
        for attr in ["src=\"", "href=\""] {
            for part in html.split(attr).skip(1) {
                let url = part.split('"').next().unwrap_or_default();
                let name = url
                    .strip_prefix("/app/")
                    .unwrap_or_else(|| panic!("{url} is not under /app/"));
                assert!(ASSETS.iter().any(|a| a.name == name), "{url} is not embedded");
                referenced += 1;
            }
        }
        assert!(referenced >= 4);
        // No inline script: every <script> has a src. No inline style.
        for part in html.split("<script").skip(1) {
            let tag = part.split('>').next().unwrap_or_default();
            assert!(tag.contains("src=\"/app/"), "inline script: <script{tag}>");
        }
        assert!(!html.contains("style=") && !html.contains("<style"));
        for handler in [
            "onclick=",
            "onload=",
            "onerror=",
            "onsubmit=",
            "oninput=",
            "javascript:",
        ] {
            assert!(!html.contains(handler), "inline handler {handler}");
        }
        for asset in ASSETS.iter().chain(std::iter::once(&INDEX)) {
            let text = String::from_utf8_lossy(asset.body);
            if asset.name.ends_with(".css") {
                assert!(
                    !text.contains("@import") && !text.contains("url("),
                    "{}",
                    asset.name
                );
            }
            for scheme in ["http://", "https://"] {
                for (at, _) in text.match_indices(scheme) {
                    let rest = &text[at + scheme.len()..];
                    if !rest.starts_with(|c: char| c.is_ascii_alphanumeric()) {
                        continue; // "http://" as a string, not a URL
                    }
                    // The SVG namespace is a name, not a request; 127.0.0.1 is named in a sentence.
                    assert!(
                        rest.starts_with("www.w3.org/2000/svg") || rest.starts_with("127.0.0.1<"),
                        "{} refers to another origin: {scheme}{}",
                        asset.name,
                        &rest[..rest.len().min(40)]
                    );
                }
            }
        }
    }

    /// A module the app loads is served: every `import … from "./x.js"` (and `import("./x.js")`) of a served
    /// script, and every `/app/…` address a script names (the worker, the icon), is in the table, so that a new
    /// module cannot be left out of it.
    #[test]
    fn every_module_the_scripts_load_is_served() {
        let served = |name: &str| ASSETS.iter().any(|a| a.name == name);
        let mut imports = 0;
        for asset in ASSETS.iter().filter(|a| a.content_type == JS) {
            let text = std::str::from_utf8(asset.body).expect("utf-8");
            for quote in ['"', '\''] {
                for before in ["from ", "import ", "import("] {
                    let opening = format!("{before}{quote}./");
                    for part in text.split(opening.as_str()).skip(1) {
                        let name = part.split(quote).next().unwrap_or_default();
                        assert!(
                            served(name),
                            "{} imports ./{name}, which is not served",
                            asset.name
                        );
                        imports += 1;
                    }
                }
                let opening = format!("{quote}/app/");
                for part in text.split(opening.as_str()).skip(1) {
                    let name = part.split(quote).next().unwrap_or_default();
                    assert!(
                        served(name),
                        "{} names /app/{name}, which is not served",
                        asset.name
                    );
                }
            }
            assert!(
                !text.contains("from \"../"),
                "{} imports from outside /app/",
                asset.name
            );
        }
        assert!(imports >= 40, "{imports} imports");
        // And every script is loaded by something: the page (its entry), a script (the worker), or an import.
        for asset in ASSETS.iter().filter(|a| a.content_type == JS) {
            let name = asset.name;
            let loaded = ASSETS.iter().chain(std::iter::once(&INDEX)).any(|a| {
                let text = String::from_utf8_lossy(a.body);
                text.contains(&format!("\"./{name}\"")) || text.contains(&format!("\"/app/{name}\""))
            });
            assert!(loaded, "{name} is served but nothing loads it");
        }
    }

    #[test]
    fn the_manifest_makes_the_app_installable() {
        let manifest = ASSETS
            .iter()
            .find(|a| a.name == "manifest.webmanifest")
            .expect("manifest");
        let json: serde_json::Value = serde_json::from_slice(manifest.body).expect("JSON");
        assert_eq!(json["start_url"], "/");
        assert_eq!(json["display"], "standalone");
        for icon in json["icons"].as_array().expect("icons") {
            let src = icon["src"].as_str().expect("src");
            let name = src.strip_prefix("/app/").expect("under /app/");
            assert!(ASSETS.iter().any(|a| a.name == name), "{src}");
        }
    }
}
