// The Pacerelle service worker: notifications while the app is closed (docs/push.md, "The web app").
//
// A push from the relay carries a small JSON (contract: docs/push.md) with the conversation item, whose content is
// the device's end-to-end envelope: it is opened here, with the device key kept in IndexedDB, and never leaves
// this browser. A question shows its real text with Approve / Deny for yes/no questions; an action seals and
// sends the answer from here, with the page's own code (answer.js). This worker handles no fetch: the app is
// always loaded from the relay.

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import * as approvals from "./approvals.js";
import { ApiError, deviceApi } from "./api.js";

const ICON = "/app/icon.svg";
/** How long the short "Answered on another device" notice stays before it closes itself. */
const NOTICE_MS = 3000;

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  event.waitUntil(handlePush(event.data ? event.data.text() : null).catch(showGeneric));
});

/** Whatever went wrong with a push, something is shown: browsers require it, and the app has the rest. */
async function showGeneric() {
  await show("Pacerelle", { body: "Open the app to see what is new.", tag: "pacerelle", data: { url: "/" } });
  return { shown: "generic", tag: "pacerelle" };
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(handleNotificationClick(event.notification, event.action));
});

self.addEventListener("pushsubscriptionchange", (event) => {
  event.waitUntil(resubscribe(event.oldSubscription, event.newSubscription));
});

/**
 * The stored pairing with its key, or null: the one of the agent and device a push names (this browser may be
 * paired with several agents); without them, the one the app shows.
 */
async function pairing(agentId, deviceId) {
  const device = deviceId ? await store.findDevice(agentId, deviceId) : await store.loadDevice(agentId);
  const key = await answers.deviceKey(device);
  return key ? { ...device, key } : null;
}

/**
 * The app, on the question when there is one; when this browser holds several pairings, on `agentId`'s
 * conversation (with one, the address is the same as ever).
 */
const appUrl = async (agentId, questionId) => {
  const q = new URLSearchParams();
  if (agentId && (await store.listDevices().catch(() => [])).length > 1) q.set("agent", agentId);
  if (questionId) q.set("question", questionId);
  const query = q.toString();
  return query ? `/?${query}` : "/";
};

/**
 * Shows a notification; `tag` replaces the one shown before with the same tag. Its icon is Pacerelle's, or for a
 * Partner-mode pairing with an icon, the product's (an inline data URL: nothing is fetched). `device`: the
 * pairing it is about.
 */
async function show(title, options, device = null) {
  const branding = device && device.branding;
  const icon = branding && branding.icon && c.brandingProblem(branding) === null ? branding.icon : ICON;
  return self.registration.showNotification(title, { icon, lang: "en", ...options });
}

/** A short text for a notification body (the lock screen shows a few lines anyway). */
function brief(text, max = 300) {
  const t = String(text).trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/**
 * One push: `text` is the payload's plaintext (the browser decrypted it). Returns what was shown, for tests:
 * `{shown: kind, tag}` or `{closed: tag}`.
 */
async function handlePush(text) {
  let push = null;
  try {
    push = JSON.parse(text);
  } catch {
    push = null;
  }
  const device = push && push.v === 1 && typeof push.deviceId === "string" ? await pairing(push.agentId, push.deviceId) : null;
  if (!push || push.v !== 1 || !device || push.agentId !== device.agentId || push.deviceId !== device.deviceId) {
    // Not for a pairing kept here (an old subscription): browsers require a visible notification for each push.
    return showGeneric();
  }
  let item = push.item;
  if (!item || item.id !== push.id) {
    item = await fetchItem(device, push).catch(() => null);
  }
  if (!item) {
    await show(device.agentName, {
      body: push.kind === "question" ? "A question is waiting for you." : "Something new from your agent.",
      tag: push.kind === "question" ? push.id : "pacerelle",
      requireInteraction: push.kind === "question",
      data: { agentId: device.agentId, url: await appUrl(device.agentId, push.kind === "question" ? push.id : null) },
    }, device);
    return { shown: "fetch-failed", tag: push.id };
  }
  return showItem(device, item);
}

/** The item a push names, read from the conversation when the push could not carry it (over 4 KiB). */
async function fetchItem(device, push) {
  let from = null;
  try {
    const seq = c.parseCursor(push.cursor);
    from = seq > 0n ? c.encodeCursor(seq - 1n) : null;
  } catch {
    from = null;
  }
  const api = deviceApi(device.deviceToken);
  for (let pages = 0, cursor = from; pages < 5; pages++) {
    const page = await api.conversation(cursor, 0);
    const found = page.items.find((i) => i.id === push.id);
    if (found) return found;
    if (page.items.length === 0) return null;
    cursor = page.cursor;
  }
  return null;
}

/** Shows one conversation item as a notification, or removes the one a closing update is about. */
async function showItem(device, item) {
  const d = device;
  switch (item.kind) {
    case "question": {
      let opened;
      try {
        opened = await answers.openQuestion(d, item);
      } catch {
        await show(d.agentName, {
          body: "A question arrived that could not be authenticated. Open the app.",
          tag: item.id,
          data: { agentId: d.agentId, url: await appUrl(d.agentId, item.id) },
        }, d);
        return { shown: "rejected", tag: item.id };
      }
      const { payload } = opened;
      const closed = item.question.state !== "pending" || Date.parse(payload.expiresAt) <= Date.now();
      if (closed) return closeQuestion(item.id, item.question.state, item.question, d);
      // Several approvals: the count so far; a question this device approved already has no actions left here.
      const tally = approvals.tally(payload, item.question, d.deviceId);
      const yesNo = payload.kind === "yes_no" && !(tally && tally.mine);
      const lines = [brief(payload.question)];
      if (payload.details) lines.push(brief(payload.details, 200));
      if (tally) lines.push(tally.mine ? approvals.waitingText(tally) : approvals.tallyText(tally));
      const body = lines.join("\n");
      await show(d.agentName, {
        body,
        tag: item.id,
        renotify: true,
        requireInteraction: true,
        timestamp: Date.parse(item.createdAt) || Date.now(),
        // Where the platform shows no actions (iOS), a tap opens the app on the question.
        actions: yesNo
          ? [
              { action: "yes", title: "Approve" },
              { action: "no", title: "Deny" },
            ]
          : [],
        // Only the sealed item is kept with the notification; it is opened again when an action is chosen.
        data: { kind: "question", agentId: d.agentId, deviceId: d.deviceId, questionId: item.id, item, url: await appUrl(d.agentId, item.id) },
      }, d);
      return { shown: "question", tag: item.id };
    }
    case "reply": {
      const reply = await c.openJson(d.key, c.context.reply(d.agentId, d.deviceId, item.id), item.envelope);
      if (typeof reply.text !== "string" || reply.sourceMessageId !== item.sourceMessageId) throw new c.CryptoError("open");
      await show(d.agentName, { body: brief(reply.text), tag: item.id, data: { agentId: d.agentId, url: await appUrl(d.agentId) } }, d);
      return { shown: "reply", tag: item.id };
    }
    case "notification": {
      const n = await c.openJson(d.key, c.context.notification(d.agentId, d.deviceId, item.id), item.envelope);
      if (typeof n.text !== "string") throw new c.CryptoError("malformed");
      const title = typeof n.title === "string" && n.title ? `${n.title} — ${d.agentName}` : d.agentName;
      await show(title, { body: brief(n.text), tag: item.id, data: { agentId: d.agentId, url: await appUrl(d.agentId) } }, d);
      return { shown: "notification", tag: item.id };
    }
    case "update":
      if (item.subjectKind === "question") return closeQuestion(item.subjectId, item.state, item.question, d);
      return { shown: null };
    default:
      return { shown: null };
  }
}

const CLOSED = {
  expired: "Expired — no answer was given in time",
  cancelled: "Cancelled by the agent",
};

/**
 * A question was closed (answered elsewhere, expired, cancelled): its notification goes away. Browsers require a
 * visible notification for each push, so it is replaced by a short, silent notice with the same tag ("Answered on
 * Bob's tablet", or "Answered at the computer: yes" when the person answered through the agent), which closes
 * itself after a few seconds. When this device answered, the confirmation shown after the action ("Approved")
 * stays as it is. Without a notification for that question, nothing is shown.
 */
async function closeQuestion(questionId, state, meta, device) {
  const [current] = await self.registration.getNotifications({ tag: questionId });
  if (!current) return { closed: questionId };
  if (current.data && current.data.kind === "answered") return { closed: questionId, kept: true };
  const host = answers.answeredAtComputer(meta);
  const mine = !host && device && meta && meta.answeredBy === device.deviceId;
  const body =
    state === "answered"
      ? host
        ? await atComputerNotice(current, meta, device)
        : mine
          ? "Answered on this device"
          : `Answered on ${(meta && meta.answeredByName) || "another device"}`
      : CLOSED[state] || "Closed";
  const agentId = device ? device.agentId : current.data && current.data.agentId;
  await show(current.title, { body, tag: questionId, silent: true, data: { kind: "closed", agentId, url: await appUrl(agentId, questionId) } }, device);
  // After this push's handling ends (so that the notice counts as shown), it closes itself.
  setTimeout(() => closeTag(questionId, "closed"), NOTICE_MS);
  return { closed: questionId, notice: body };
}

/**
 * "Answered at the computer: <answer>", the answer read from the copy the agent sealed (device ""), opened with the
 * question the notification keeps; without it, or when it does not open, "Answered at the computer".
 */
async function atComputerNotice(current, meta, device) {
  const item = current.data && current.data.item;
  try {
    const d = device || (await pairing(current.data && current.data.agentId, current.data && current.data.deviceId));
    if (d && item) {
      const { payload, digest } = await answers.openQuestion(d, item);
      const answer = await answers.openAnswerCopy(d, { id: item.id, payload, digest }, meta);
      if (answer) return `Answered at the computer: ${answers.answerText(answer)}`;
    }
  } catch {
    /* shown without the answer */
  }
  return "Answered at the computer";
}

async function closeTag(tag, kind) {
  for (const n of await self.registration.getNotifications({ tag })) {
    if (!kind || (n.data && n.data.kind === kind)) n.close();
  }
}

/**
 * A tap on a notification or one of its actions. "yes" / "no" on a question: the answer is sealed, queued and sent
 * from here (answer.js, as the app's buttons do), then the notification says "Approved" / "Denied" (or, for a yes
 * to a question that needs several approvals, "You approved — waiting for 1 more": it stays open); if it cannot
 * be sent, the app opens on the question (the answer stays queued: the app sends it, or says why it cannot). A tap
 * on the body opens or focuses the app, on the question when there is one. Returns `{answered, result}` for tests.
 */
async function handleNotificationClick(notification, action) {
  const data = notification.data || {};
  if (data.kind === "question" && (action === "yes" || action === "no")) {
    const outcome = await answerFromNotification(data, action);
    if (outcome.ok) {
      await show(notification.title, {
        body: `${outcome.label} — ${brief(outcome.question, 200)}`,
        tag: data.questionId,
        silent: true,
        data: { kind: "answered", agentId: data.agentId, url: data.url },
      }, outcome.device);
      setTimeout(() => closeTag(data.questionId, "answered"), NOTICE_MS * 2);
      return { answered: action, ok: true };
    }
    notification.close();
    await openApp(data.url, data.questionId, data.agentId);
    return { answered: action, ok: false, error: outcome.error };
  }
  notification.close();
  await openApp(data.url || "/", data.questionId, data.agentId);
  return { opened: data.url || "/" };
}

async function answerFromNotification(data, action) {
  try {
    const device = await pairing(data.agentId, data.deviceId);
    if (!device) return { ok: false, error: "not paired" };
    const { payload, digest } = await answers.openQuestion(device, data.item);
    const q = { id: data.questionId, payload, digest };
    const entry = await answers.queueAnswer(device, q, { type: action });
    const dq = await answers.sendAnswer(deviceApi(device.deviceToken), entry);
    await store.saveAnswer(q.id, entry.envelope);
    // A yes to a question that needs several approvals is recorded, and the question waits for the other devices.
    const tally = approvals.keptOpen(payload, dq, device.deviceId) ? approvals.tally(payload, dq, device.deviceId) : null;
    if (tally) return { ok: true, label: approvals.waitingText(tally), question: payload.question, device };
    // A retry from this device gets the answer it stored first: the one that counts is read from its copy.
    const counted = (await answers.openAnswerCopy(device, q, dq)) || (await answers.openAnswer(device, q.id, entry.envelope));
    return { ok: true, label: answers.describeAnswer(counted, payload), question: payload.question, device };
  } catch (e) {
    return { ok: false, error: e instanceof ApiError ? e.code : String(e && e.message ? e.message : e) };
  }
}

/** Focuses a window of the app (telling it which agent and question to show), or opens one. */
async function openApp(url, questionId, agentId) {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const target = new URL(url, self.location.origin).href;
  const mine = windows.find((w) => new URL(w.url).origin === self.location.origin);
  if (mine) {
    mine.postMessage({ type: "open", questionId: questionId || null, agentId: agentId || null });
    try {
      await mine.focus();
    } catch {
      /* focusing needs the notification's activation; the message is enough otherwise */
    }
    return;
  }
  await self.clients.openWindow(target);
}

/** The browser replaced the subscription: the relay learns the new one and forgets the old, for every pairing. */
async function resubscribe(oldSubscription, newSubscription) {
  const devices = await store.listDevices();
  if (devices.length === 0) return;
  let subscription = newSubscription;
  if (!subscription && oldSubscription && oldSubscription.options) {
    subscription = await self.registration.pushManager.subscribe(oldSubscription.options);
  }
  for (const device of devices) {
    const api = deviceApi(device.deviceToken);
    if (subscription) await api.registerPush(subscription.toJSON()).catch(() => {});
    if (oldSubscription && (!subscription || oldSubscription.endpoint !== subscription.endpoint)) {
      await api.unregisterPush(oldSubscription.endpoint).catch(() => {});
    }
  }
}

// What the events run, reachable by name for the browser tests (through the DevTools protocol), which cannot
// click a notification: the same functions, not copies.
self.pacerelle = { handlePush, handleNotificationClick };
