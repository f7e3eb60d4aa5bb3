//! The engine: a seeded random generator, mutations of byte strings and of JSON, and the loop that runs a
//! target on mutated inputs, each under `catch_unwind`, until a case or time budget is spent or a case fails.
//!
//! There is no coverage instrumentation on stable Rust; instead each target returns a small *signal* for
//! each case (which error, which status), and an input whose signal was not seen before joins the corpus,
//! so that later cases start from inputs that reached new places.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A bytes-in fuzz target.
pub trait Target {
    /// Its name, for `--target` and the regressions folder.
    fn name(&self) -> &'static str;
    /// Valid inputs built with the real APIs (and the core's vector files), where mutation starts.
    fn seeds(&self) -> Vec<Vec<u8>>;
    /// Tokens worth inserting whole (prefixes, separators, field names).
    fn dictionary(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }
    /// Runs one case. Panics when a property fails; returns a signal saying which path the case took.
    fn run(&self, input: &[u8]) -> u64;
}

/// A failed case: the input and what the panic said.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The input that failed.
    pub input: Vec<u8>,
    /// The panic's message and location.
    pub message: String,
}

/// What one target's run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Cases run.
    pub cases: u64,
    /// Wall time spent running them.
    pub elapsed: Duration,
    /// Distinct signals seen.
    pub signals: usize,
    /// The first failed case, which ended the run.
    pub crash: Option<Crash>,
}

/// How long a run may go on: whichever limit is reached first.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// At most this many cases.
    pub cases: Option<u64>,
    /// At most this long.
    pub time: Option<Duration>,
}

pub use pacerelle_test_support::Rng;

/// A seed derived from the run's seed and a target's name, so that each target has its own stream.
pub fn target_seed(seed: u64, name: &str) -> u64 {
    name.bytes().fold(seed ^ 0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
    })
}

/// The marker the seeds carry in their values: a response must never quote it back.
pub const MARKER: &str = "Zq8vKxMARK";

/// Bytes that often matter to parsers.
const INTERESTING: &[u8] = b"\0\x01\x7f\x80\xff\xc3\xe2 \t\n\r\"\\'`{}[],:.#/_-=+%&?@~*!$";

/// Tokens every target may get.
const COMMON: &[&str] = &[
    MARKER,
    "\"",
    "\\\"",
    "\\u0000",
    "\\ud800",
    "`",
    "null",
    "true",
    "false",
    "-1",
    "0",
    "1e999",
    "18446744073709551616",
    "9223372036854775808",
    "-9223372036854775809",
    "\"\"",
    "[]",
    "{}",
    "c1.",
    "pcr1_",
    "v1.",
    "ag_",
    "dv_",
    "msg_",
    "qst_",
    "https://",
    "http://",
    "/pair#",
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    "=",
    "==",
    "é",
    "\u{202e}",
    "\u{feff}",
];

/// One mutated copy of `input`: one to four stacked edits (byte edits, dictionary tokens, splices with
/// another corpus entry, and JSON-aware edits when a JSON value can be found in the input).
pub fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], dictionary: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    let edits = 1 + rng.below(4);
    for _ in 0..edits {
        match rng.below(13) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = if rng.one_in(2) {
                    *rng.pick(INTERESTING)
                } else {
                    rng.next_u64() as u8
                };
            }
            2 if !out.is_empty() => {
                let at = rng.below(out.len());
                let len = 1 + rng.below((out.len() - at).min(16));
                out.drain(at..at + len);
            }
            3 if !out.is_empty() => {
                let keep = rng.below(out.len());
                out.truncate(keep);
            }
            4 => {
                let at = rng.below(out.len() + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n)
                    .map(|_| {
                        if rng.one_in(2) {
                            *rng.pick(INTERESTING)
                        } else {
                            rng.next_u64() as u8
                        }
                    })
                    .collect();
                out.splice(at..at, bytes);
            }
            5 if !out.is_empty() => {
                // Repeat a range, sometimes many times (long values).
                let at = rng.below(out.len());
                let len = 1 + rng.below((out.len() - at).min(32));
                let piece = out[at..at + len].to_vec();
                let times = if rng.one_in(8) { 1 + rng.below(2000) } else { 1 };
                let insert_at = rng.below(out.len() + 1);
                let repeated: Vec<u8> = piece.iter().copied().cycle().take(len * times).collect();
                out.splice(insert_at..insert_at, repeated);
            }
            6 | 7 => {
                let token: Vec<u8> = if !dictionary.is_empty() && rng.one_in(2) {
                    rng.pick(dictionary).clone()
                } else {
                    rng.pick(COMMON).as_bytes().to_vec()
                };
                let at = rng.below(out.len() + 1);
                if rng.one_in(3) && at < out.len() {
                    let end = (at + token.len()).min(out.len());
                    out.splice(at..end, token);
                } else {
                    out.splice(at..at, token);
                }
            }
            8 if !corpus.is_empty() => {
                // Splice: a prefix of this input and a suffix of another.
                let other = rng.pick(corpus);
                let cut = rng.below(out.len() + 1);
                let from = rng.below(other.len() + 1);
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            9..=11 => {
                if let Some(edited) = mutate_json(rng, &out) {
                    out = edited;
                }
            }
            _ if out.len() >= 2 => {
                // Swap two bytes.
                let (a, b) = (rng.below(out.len()), rng.below(out.len()));
                out.swap(a, b);
            }
            _ => out.push(rng.next_u64() as u8),
        }
    }
    if out.len() > 300_000 {
        out.truncate(300_000);
    }
    out
}

/// A JSON-aware edit of the first JSON object or array in `input` (after any prefix the target uses):
/// a value replaced by another type or an extreme, a key removed, renamed or duplicated, an element
/// repeated. `None` when no JSON is found.
fn mutate_json(rng: &mut Rng, input: &[u8]) -> Option<Vec<u8>> {
    let start = input.iter().position(|b| *b == b'{' || *b == b'[')?;
    let mut value: serde_json::Value = serde_json::from_slice(&input[start..]).ok()?;
    let mut nodes = 0usize;
    count_nodes(&value, &mut nodes);
    let target = rng.below(nodes);
    let mut seen = 0usize;
    let mut duplicate_key: Option<String> = None;
    edit_node(rng, &mut value, target, &mut seen, &mut duplicate_key);
    let mut text = serde_json::to_vec(&value).ok()?;
    if let Some(key) = duplicate_key
        && text.first() == Some(&b'{')
    {
        // serde_json's maps cannot hold a key twice; write the duplicate by hand.
        let extra = format!("{}:{},", serde_json::Value::String(key), random_value(rng, 0));
        text.splice(1..1, extra.into_bytes());
    }
    let mut out = input[..start].to_vec();
    out.extend_from_slice(&text);
    Some(out)
}

fn count_nodes(value: &serde_json::Value, n: &mut usize) {
    *n += 1;
    match value {
        serde_json::Value::Array(items) => items.iter().for_each(|v| count_nodes(v, n)),
        serde_json::Value::Object(map) => map.values().for_each(|v| count_nodes(v, n)),
        _ => {}
    }
}

fn edit_node(
    rng: &mut Rng,
    value: &mut serde_json::Value,
    target: usize,
    seen: &mut usize,
    duplicate_key: &mut Option<String>,
) -> bool {
    use serde_json::Value;
    if *seen == target {
        match value {
            Value::Object(map) if !map.is_empty() && rng.one_in(2) => {
                let keys: Vec<String> = map.keys().cloned().collect();
                let key = rng.pick(&keys).clone();
                match rng.below(4) {
                    0 => {
                        map.remove(&key);
                    }
                    1 => {
                        if let Some(v) = map.remove(&key) {
                            map.insert(format!("{key}{MARKER}"), v);
                        }
                    }
                    2 => *duplicate_key = Some(key),
                    _ => {
                        map.insert(MARKER.to_string(), random_value(rng, 0));
                    }
                }
            }
            Value::Array(items) if !items.is_empty() && rng.one_in(2) => {
                let i = rng.below(items.len());
                let copy = items[i].clone();
                let times = if rng.one_in(4) { 1 + rng.below(100) } else { 1 };
                for _ in 0..times {
                    items.push(copy.clone());
                }
            }
            Value::String(s) if rng.one_in(2) => {
                // Keep the string, change it: the marker inside, a cut, a repeat.
                match rng.below(3) {
                    0 => {
                        let mut cut = rng.below(s.len() + 1);
                        while !s.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        s.truncate(cut);
                    }
                    1 => s.push_str(MARKER),
                    _ => *s = s.repeat(1 + rng.below(50)),
                }
                if !s.contains(MARKER) && rng.one_in(2) {
                    s.push_str(MARKER);
                }
            }
            _ => *value = random_value(rng, 0),
        }
        return true;
    }
    *seen += 1;
    match value {
        Value::Array(items) => {
            for item in items {
                if edit_node(rng, item, target, seen, duplicate_key) {
                    return true;
                }
            }
        }
        Value::Object(map) => {
            for (_, item) in map.iter_mut() {
                if edit_node(rng, item, target, seen, duplicate_key) {
                    return true;
                }
            }
        }
        _ => {}
    }
    false
}

/// A random JSON value: extremes of each type, strings with the marker and awkward characters.
fn random_value(rng: &mut Rng, depth: usize) -> serde_json::Value {
    use serde_json::{Value, json};
    match rng.below(if depth > 2 { 7 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => json!(*rng.pick(&[0i64, -1, 1, i64::MIN, i64::MAX, 55, 56, 100, 101, 1000])),
        3 => json!(*rng.pick(&[u64::MAX, 1 << 53, (1 << 53) + 1])),
        4 => json!(*rng.pick(&[0.5f64, -0.0, 1e300, f64::MIN_POSITIVE])),
        5 => Value::String(MARKER.to_string()),
        6 => Value::String(
            rng.pick(&[
                "",
                "a`b\"c",
                "yes_no",
                "owner",
                "2026-11-30T23:57:14.123Z",
                "0000-01-01T00:00:00+23:59",
                "9999-12-31T23:59:59.999-23:59",
                "c1.AAAAAAAAAAE",
                "https://127.0.0.1/x",
                "\u{0}",
            ])
            .to_string()
                + if rng.one_in(2) { MARKER } else { "" },
        ),
        7 => Value::Array((0..rng.below(3)).map(|_| random_value(rng, depth + 1)).collect()),
        _ => {
            let mut map = serde_json::Map::new();
            for _ in 0..rng.below(3) {
                map.insert(MARKER.to_string(), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// The last panic's message, kept by the quiet hook while a target runs.
static LAST_PANIC: Mutex<String> = Mutex::new(String::new());

/// Runs one case under `catch_unwind`: its signal, or the panic's message. With [`quiet_panics`] in place,
/// a panic caught elsewhere during the case (a task the relay spawned) fails the case too.
pub fn run_case(target: &dyn Target, input: &[u8]) -> Result<u64, String> {
    let take = || {
        let mut last = LAST_PANIC.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *last)
    };
    take();
    let result = catch_unwind(AssertUnwindSafe(|| target.run(input)));
    let recorded = take();
    result
        .map_err(|payload| {
            if !recorded.is_empty() {
                return recorded.clone();
            }
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic without a message".into())
        })
        .and_then(|signal| {
            if recorded.is_empty() {
                Ok(signal)
            } else {
                Err(format!("a panic was caught during the case: {recorded}"))
            }
        })
}

/// Replaces the panic hook by one that records the message (with its location) instead of printing it,
/// so that a fuzz run's output stays readable; the message is shown with the crash.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = info.to_string();
        }
    }));
}

/// Fuzzes `target` from `seed` within `budget`: every seed first, then mutations. Stops at the first
/// failed case.
pub fn fuzz(target: &dyn Target, seed: u64, budget: Budget) -> Outcome {
    let mut rng = Rng::new(target_seed(seed, target.name()));
    let dictionary = target.dictionary();
    let mut corpus: Vec<Vec<u8>> = target.seeds();
    corpus.push(Vec::new());
    let mut signals: HashSet<u64> = HashSet::new();
    let started = Instant::now();
    let mut cases = 0u64;
    let over = |cases: u64, started: Instant| {
        budget.cases.is_some_and(|max| cases >= max)
            || (cases.is_multiple_of(64) && budget.time.is_some_and(|t| started.elapsed() >= t))
    };
    let mut crash = None;
    let initial = corpus.len();
    let mut i = 0usize;
    while !over(cases, started) {
        let input = if i < initial {
            corpus[i].clone()
        } else {
            let base = rng.pick(&corpus).clone();
            mutate(&mut rng, &base, &corpus, &dictionary)
        };
        i += 1;
        cases += 1;
        match run_case(target, &input) {
            Ok(signal) => {
                if signals.insert(signal) && i > initial && corpus.len() < 4096 {
                    corpus.push(input);
                }
            }
            Err(message) => {
                crash = Some(Crash { input, message });
                break;
            }
        }
    }
    Outcome {
        cases,
        elapsed: started.elapsed(),
        signals: signals.len(),
        crash,
    }
}

/// The folder of committed crash inputs: `pacerelle-fuzz/regressions/`.
pub fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions")
}

/// Writes a crash input to `<dir>/<target>/<hash>.bin` (the first 8 bytes of its SHA-256, in hex) and
/// returns the path.
pub fn save_crash(dir: &Path, target: &str, input: &[u8]) -> std::io::Result<PathBuf> {
    let digest = pacerelle_core::keys::sha256(input);
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let folder = dir.join(target);
    std::fs::create_dir_all(&folder)?;
    let path = folder.join(format!("{name}.bin"));
    std::fs::write(&path, input)?;
    Ok(path)
}

/// The committed regression inputs of `target`, sorted by path.
pub fn regressions_of(dir: &Path, target: &str) -> std::io::Result<Vec<PathBuf>> {
    let folder = dir.join(target);
    if !folder.exists() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    Ok(files)
}
