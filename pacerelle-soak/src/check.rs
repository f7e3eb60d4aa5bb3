//! The checker: what the senders had acknowledged against the handler's records and what the devices see.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use pacerelle_client::{
    Cursor, core::wire::ItemKind, core::wire::ItemState, core::wire::MessageState, core::wire::SubjectKind,
    device::ConversationItem,
};

use crate::agent::reply_text;
use crate::records::Entry;

/// A task a sender tried to send.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Its id, drawn by the sender.
    pub message_id: String,
    /// Which device sent it.
    pub device: usize,
    /// When the send began, in ms since the Unix epoch.
    pub sent_ms: u64,
    /// The relay acknowledged it (the send returned the stored task). An unacknowledged task may or may not
    /// be stored.
    pub acked: bool,
    /// When the acknowledgement came back, in ms since the Unix epoch (0 when none came).
    pub acked_ms: u64,
}

/// What one device's conversation shows.
#[derive(Debug, Default)]
pub struct DeviceView {
    /// The tasks it shows processed (by their own state or by an update item).
    pub processed: HashSet<String>,
    /// The replies' texts, by the task they answer.
    pub replies: HashMap<String, Vec<String>>,
    /// Each task's position in the agent's stream (its cursor), as the conversation shows it.
    pub cursors: HashMap<String, Cursor>,
}

impl DeviceView {
    /// The view of a conversation read from its start.
    pub fn from_items(items: &[ConversationItem]) -> DeviceView {
        let mut view = DeviceView::default();
        for item in items {
            match item.kind {
                ItemKind::Message => {
                    view.cursors.insert(item.id.clone(), item.cursor);
                    if item.state == Some(MessageState::Processed) {
                        view.processed.insert(item.id.clone());
                    }
                }
                ItemKind::Update => {
                    if let Some(update) = &item.update
                        && update.subject_kind == SubjectKind::Message
                        && update.state == ItemState::Processed
                    {
                        view.processed.insert(update.subject_id.clone());
                    }
                }
                ItemKind::Reply => {
                    let source = item.source_message_id.clone().unwrap_or_default();
                    view.replies.entry(source).or_default().push(item.text.clone());
                }
                _ => {}
            }
        }
        view
    }
}

/// One broken promise, about one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What is wrong, the same words for every task it applies to.
    pub what: &'static str,
    /// The task.
    pub message_id: String,
}

/// The figures of a run and what it broke.
#[derive(Debug, Default)]
pub struct Report {
    /// Tasks the relay acknowledged.
    pub acknowledged: usize,
    /// Tasks whose send failed (a kill in the way); each may or may not exist.
    pub unacknowledged: usize,
    /// Calls of the handler.
    pub invocations: usize,
    /// Calls on a task the relay flagged as delivered before.
    pub redelivered: usize,
    /// Calls on a task the handler had already recorded (so not recorded again).
    pub repeated: usize,
    /// Tasks recorded.
    pub recorded: usize,
    /// Unacknowledged tasks that were handled all the same.
    pub unacknowledged_handled: usize,
    /// Acknowledged tasks the handler was given at least once.
    pub delivered: usize,
    /// Acknowledged tasks never given to the handler.
    pub lost: usize,
    /// Tasks recorded or replied to more than once, or handed out again once marked processed.
    pub duplicates: usize,
    /// From the start of a send to the handler's record, for acknowledged tasks, in ms: median, 99th
    /// percentile, maximum.
    pub latency_ms: Option<(u64, u64, u64)>,
    /// Everything broken, in the order found.
    pub violations: Vec<Violation>,
}

impl Report {
    /// The violations grouped by what is wrong, each with its count and the first ids.
    pub fn violations_summary(&self, ids_shown: usize) -> String {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for v in &self.violations {
            groups.entry(v.what).or_default().push(&v.message_id);
        }
        let mut out = String::new();
        for (what, ids) in groups {
            let shown: Vec<&str> = ids.iter().take(ids_shown).copied().collect();
            let _ = writeln!(
                out,
                "  {what}: {} task(s), first: {}",
                ids.len(),
                shown.join(", ")
            );
        }
        out
    }
}

/// An acknowledged task the handler never saw.
const LOST: &str = "acknowledged but never recorded by the handler";
/// A task the idempotent handler recorded twice.
const RECORDED_TWICE: &str = "recorded more than once";
/// A task answered twice in its device's conversation.
const REPLIED_TWICE: &str = "replied to more than once";
/// A task handed out again after the runner had marked it processed.
const AFTER_PROCESSED: &str = "handed out again after it was marked processed";
/// A task numbered before a task acknowledged before it was sent.
const OUT_OF_ORDER: &str = "numbered before a task acknowledged before it was sent (a cursor would skip it)";
/// The kinds of violation counted as duplicates in the figures.
const DUPLICATES: [&str; 3] = [RECORDED_TWICE, REPLIED_TWICE, AFTER_PROCESSED];

/// Flags each acknowledged task whose cursor is below that of a task acknowledged before it was sent: an agent
/// that had read up to the earlier task's cursor would never see it.
fn order_rule(sent: &[Sent], views: &[DeviceView], flag: &mut impl FnMut(&'static str, &str)) {
    let cursor_of = |s: &Sent| {
        views
            .get(s.device)
            .and_then(|v| v.cursors.get(&s.message_id))
            .copied()
    };
    let mut by_ack: Vec<(u64, Cursor)> = sent
        .iter()
        .filter(|s| s.acked)
        .filter_map(|s| cursor_of(s).map(|c| (s.acked_ms, c)))
        .collect();
    by_ack.sort_unstable();
    let mut by_start: Vec<(&Sent, Cursor)> = sent
        .iter()
        .filter(|s| s.acked)
        .filter_map(|s| cursor_of(s).map(|c| (s, c)))
        .collect();
    by_start.sort_unstable_by_key(|(s, _)| s.sent_ms);
    let (mut next, mut highest) = (0, None::<Cursor>);
    for (task, cursor) in by_start {
        // Every task acknowledged strictly before this one's send began (ms: equal times prove nothing).
        while next < by_ack.len() && by_ack[next].0 < task.sent_ms {
            highest = highest.max(Some(by_ack[next].1));
            next += 1;
        }
        if highest.is_some_and(|h| cursor < h) {
            flag(OUT_OF_ORDER, &task.message_id);
        }
    }
}

/// Flags each task given to the handler again after the same agent process had taken another task after it
/// (the runner takes the next task only once this one's reply is stored and its processed mark acknowledged),
/// unless the runner reported the task failed (left unprocessed on purpose).
fn after_processed_rule(
    invocations: &[Entry],
    failures: &[Entry],
    flag: &mut impl FnMut(&'static str, &str),
) {
    let failed: HashSet<&str> = failures.iter().map(|e| e.message_id.as_str()).collect();
    // The position in the log from which each task counts as processed.
    let mut processed_from: HashMap<&str, usize> = HashMap::new();
    let mut last_of_run: HashMap<u64, &str> = HashMap::new();
    for (i, e) in invocations.iter().enumerate() {
        if let Some(previous) = last_of_run.insert(e.run, &e.message_id)
            && previous != e.message_id
        {
            processed_from.entry(previous).or_insert(i);
        }
    }
    let mut flagged = HashSet::new();
    for (i, e) in invocations.iter().enumerate() {
        let id = e.message_id.as_str();
        if processed_from.get(id).is_some_and(|&from| i > from) && !failed.contains(id) && flagged.insert(id)
        {
            flag(AFTER_PROCESSED, id);
        }
    }
}

/// Checks the promises of at-least-once delivery with an idempotent handler:
/// - every acknowledged task is recorded exactly once by the handler, shown processed to its device, and
///   answered there by exactly one reply, the handler's;
/// - an unacknowledged task is recorded at most once and answered at most once;
/// - nothing is recorded or answered that no sender sent, and no task is answered without a record;
/// - every record line is whole;
/// - cursors never skip: a task acknowledged before another was sent has the smaller cursor (the stream is
///   numbered in the order its items commit, so an agent reading up to a cursor has seen every task below it);
/// - no task is handed to the handler again once the runner went on past it in the same process (the runner
///   marks a task processed before it takes the next one), unless the runner reported it failed.
///
/// `views` holds one view per device, in the senders' order.
pub fn check(
    sent: &[Sent],
    views: &[DeviceView],
    records: &[Entry],
    invocations: &[Entry],
    failures: &[Entry],
    malformed_lines: usize,
) -> Report {
    let mut report = Report::default();
    let mut violations = Vec::new();
    let mut flag = |what: &'static str, id: &str| {
        violations.push(Violation {
            what,
            message_id: id.to_string(),
        })
    };
    let mut record_count: HashMap<&str, usize> = HashMap::new();
    let mut first_record: HashMap<&str, u64> = HashMap::new();
    for r in records {
        *record_count.entry(&r.message_id).or_default() += 1;
        let at = first_record.entry(&r.message_id).or_insert(r.at_ms);
        *at = (*at).min(r.at_ms);
    }
    let by_id: HashMap<&str, &Sent> = sent.iter().map(|s| (s.message_id.as_str(), s)).collect();
    let empty = DeviceView::default();
    let mut latencies = Vec::new();

    for task in sent {
        let id = task.message_id.as_str();
        let view = views.get(task.device).unwrap_or(&empty);
        let recorded = record_count.get(id).copied().unwrap_or(0);
        let replies = view.replies.get(id).map_or(&[][..], Vec::as_slice);
        if task.acked {
            report.acknowledged += 1;
            match recorded {
                0 => flag(LOST, id),
                1 => {}
                _ => flag(RECORDED_TWICE, id),
            }
            if !view.processed.contains(id) {
                flag("acknowledged but not shown processed to its device", id);
            }
            match replies.len() {
                0 => flag("acknowledged but never replied to", id),
                1 => {}
                _ => flag(REPLIED_TWICE, id),
            }
            if let Some(at) = first_record.get(id) {
                latencies.push(at.saturating_sub(task.sent_ms));
            }
        } else {
            report.unacknowledged += 1;
            if recorded > 0 {
                report.unacknowledged_handled += 1;
            }
            if recorded > 1 {
                flag(RECORDED_TWICE, id);
            }
            if replies.len() > 1 {
                flag(REPLIED_TWICE, id);
            }
        }
        if !replies.is_empty() && recorded == 0 {
            flag("replied to without a record", id);
        }
        if replies.iter().any(|text| *text != reply_text(id)) {
            flag("replied to with another text than the handler's", id);
        }
    }
    for id in record_count.keys() {
        if !by_id.contains_key(id) {
            flag("recorded but never sent", id);
        }
    }
    for view in views {
        for source in view.replies.keys() {
            if !by_id.contains_key(source.as_str()) {
                flag("replied to but never sent", source);
            }
        }
    }
    order_rule(sent, views, &mut flag);
    after_processed_rule(invocations, failures, &mut flag);
    if malformed_lines > 0 {
        flag(
            "malformed lines in the handler's records",
            &malformed_lines.to_string(),
        );
    }

    report.lost = violations.iter().filter(|v| v.what == LOST).count();
    report.duplicates = violations.iter().filter(|v| DUPLICATES.contains(&v.what)).count();
    let invoked: HashSet<&str> = invocations.iter().map(|e| e.message_id.as_str()).collect();
    report.delivered = sent
        .iter()
        .filter(|s| s.acked && invoked.contains(s.message_id.as_str()))
        .count();
    report.recorded = record_count.len();
    report.invocations = invocations.len();
    report.redelivered = invocations.iter().filter(|e| e.redelivered).count();
    let distinct: HashSet<&str> = invocations.iter().map(|e| e.message_id.as_str()).collect();
    report.repeated = invocations.len() - distinct.len();
    latencies.sort_unstable();
    if let Some(&max) = latencies.last() {
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        report.latency_ms = Some((at(0.5), at(0.99), max));
    }
    report.violations = violations;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(id: &str, acked: bool) -> Sent {
        Sent {
            message_id: id.into(),
            device: 0,
            sent_ms: 1_000,
            acked,
            acked_ms: if acked { 1_100 } else { 0 },
        }
    }

    fn entry(id: &str, at_ms: u64) -> Entry {
        Entry {
            message_id: id.into(),
            redelivered: false,
            attempt: 1,
            at_ms,
            run: 1,
        }
    }

    fn view(processed: &[&str], replies: &[(&str, &str)]) -> DeviceView {
        let mut v = DeviceView {
            processed: processed.iter().map(|s| s.to_string()).collect(),
            ..DeviceView::default()
        };
        for (source, text) in replies {
            v.replies
                .entry(source.to_string())
                .or_default()
                .push(text.to_string());
        }
        v
    }

    #[test]
    fn a_clean_run_has_no_violation_and_its_figures() {
        let sent = [sent("msg_a", true), sent("msg_b", false)];
        let views = [view(&["msg_a"], &[("msg_a", "done msg_a")])];
        let records = [entry("msg_a", 1_250)];
        let mut again = entry("msg_a", 1_300);
        again.redelivered = true;
        let report = check(&sent, &views, &records, &[entry("msg_a", 1_250), again], &[], 0);
        assert_eq!(report.violations, vec![]);
        assert_eq!((report.acknowledged, report.unacknowledged), (1, 1));
        assert_eq!(
            (report.invocations, report.redelivered, report.repeated),
            (2, 1, 1)
        );
        assert_eq!(report.latency_ms, Some((250, 250, 250)));
    }

    #[test]
    fn a_cursor_that_would_skip_and_a_task_handed_out_after_processed_are_named() {
        // msg_b was sent after msg_a was acknowledged, yet numbered below it.
        let mut a = sent("msg_a", true);
        let mut b = sent("msg_b", true);
        (a.sent_ms, a.acked_ms, b.sent_ms, b.acked_ms) = (1_000, 1_100, 1_200, 1_300);
        let mut v = view(
            &["msg_a", "msg_b"],
            &[("msg_a", "done msg_a"), ("msg_b", "done msg_b")],
        );
        v.cursors.insert("msg_a".into(), Cursor(9));
        v.cursors.insert("msg_b".into(), Cursor(5));
        // Run 1 handled msg_a then msg_b (so msg_a was marked processed), then run 2 got msg_a again; msg_b
        // failed in run 1 and comes again in run 2 rightly.
        let mut later = entry("msg_a", 1_500);
        later.run = 2;
        let mut b_again = entry("msg_b", 1_600);
        b_again.run = 2;
        let invocations = [entry("msg_a", 1_150), entry("msg_b", 1_350), later, b_again];
        let records = [entry("msg_a", 1_150), entry("msg_b", 1_350)];
        let report = check(&[a, b], &[v], &records, &invocations, &[entry("msg_b", 1_360)], 0);
        let found: Vec<(&str, &str)> = report
            .violations
            .iter()
            .map(|v| (v.what, v.message_id.as_str()))
            .collect();
        assert_eq!(found, vec![(OUT_OF_ORDER, "msg_b"), (AFTER_PROCESSED, "msg_a")]);
        assert_eq!((report.delivered, report.lost, report.duplicates), (2, 0, 1));
    }

    #[test]
    fn each_broken_promise_is_named_with_its_task() {
        let sent = [
            sent("msg_lost", true),
            sent("msg_twice", true),
            sent("msg_open", false),
        ];
        let views = [view(
            &["msg_twice"],
            &[
                ("msg_twice", "done msg_twice"),
                ("msg_twice", "done msg_twice"),
                ("msg_open", "done msg_open"),
                ("msg_ghost", "done msg_ghost"),
            ],
        )];
        let records = [
            entry("msg_twice", 2_000),
            entry("msg_twice", 2_100),
            entry("msg_stray", 2_000),
        ];
        let report = check(&sent, &views, &records, &[], &[], 1);
        let found: Vec<(&str, &str)> = report
            .violations
            .iter()
            .map(|v| (v.what, v.message_id.as_str()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("acknowledged but never recorded by the handler", "msg_lost"),
                ("acknowledged but not shown processed to its device", "msg_lost"),
                ("acknowledged but never replied to", "msg_lost"),
                ("recorded more than once", "msg_twice"),
                ("replied to more than once", "msg_twice"),
                ("replied to without a record", "msg_open"),
                ("recorded but never sent", "msg_stray"),
                ("replied to but never sent", "msg_ghost"),
                ("malformed lines in the handler's records", "1"),
            ]
        );
        assert!(
            report
                .violations_summary(3)
                .contains("replied to more than once: 1 task(s), first: msg_twice")
        );
    }
}
