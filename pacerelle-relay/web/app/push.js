// Notifications in this browser, from the page's side: the service worker (sw.js), the permission, the push
// subscription made with the relay's key (VAPID) and its registration with the relay. See docs/push.md.

import * as c from "./crypto.js";
import { ApiError, relayApi } from "./api.js";

/** The worker's script; it is served with `Service-Worker-Allowed: /` so that its scope is the whole app. */
export const WORKER_URL = "/app/sw.js";
const SCOPE = "/";

const isIos = () => /iPhone|iPad|iPod/.test(navigator.userAgent);
const installed = () =>
  navigator.standalone === true || (window.matchMedia && window.matchMedia("(display-mode: standalone)").matches);

/** Why this browser cannot get notifications, in words, or null when it can. */
export function unsupported() {
  const worker = "serviceWorker" in navigator;
  const push = "PushManager" in window && "Notification" in window;
  if (worker && push) return null;
  if (isIos() && !installed()) {
    return "On iPhone and iPad, notifications need iOS 16.4 or later and the app on the Home Screen: tap Share, then “Add to Home Screen”, and open Pacerelle from there.";
  }
  return "This browser cannot receive notifications from a web app (no service worker or Push API).";
}

/** Registers (or finds) the service worker, and waits until it is active. */
export async function worker() {
  const registration = await navigator.serviceWorker.register(WORKER_URL, {
    scope: SCOPE,
    type: "module",
    updateViaCache: "none",
  });
  await navigator.serviceWorker.ready;
  return registration;
}

/** The registration already made, or null (no worker is started by merely reading the state). */
async function existing() {
  if (!("serviceWorker" in navigator)) return null;
  return (await navigator.serviceWorker.getRegistration(SCOPE)) || null;
}

/**
 * Where notifications stand: `{state, text}` with state "unsupported", "denied", "on" or "off". "on" means a
 * subscription exists in this browser (registered with the relay when it was made, and again at each start).
 */
export async function status() {
  const why = unsupported();
  if (why) return { state: "unsupported", text: why };
  if (Notification.permission === "denied") {
    return {
      state: "denied",
      text: "Notifications are blocked for this site. Allow them in the browser’s site settings (the icon left of the address, or Settings → Notifications), then come back here.",
    };
  }
  const registration = await existing();
  const subscription = registration ? await registration.pushManager.getSubscription() : null;
  if (subscription && Notification.permission === "granted") {
    return { state: "on", text: "Questions, replies and notifications reach this device, even when the app is closed." };
  }
  return { state: "off", text: "Questions reach this device only while the app is open." };
}

/** The relay's push key as bytes; a clear error when the relay is too old to push. */
async function relayKey() {
  try {
    const { publicKey } = await relayApi.pushKey();
    return c.b64decode(publicKey);
  } catch (e) {
    if (e instanceof ApiError && (e.kind === "no_route" || e.status === 404)) {
      throw new Error("This relay does not send notifications: it runs an older version of Pacerelle.");
    }
    throw e;
  }
}

const sameKey = (subscription, key) => {
  const current = subscription.options && subscription.options.applicationServerKey;
  return current ? c.bytesEqual(new Uint8Array(current), key) : true;
};

/** How long the browser's push service may take to give a subscription before the switch says it did not. */
const SUBSCRIBE_TIMEOUT_MS = 15000;

/**
 * Subscribes with the relay's key. A browser that cannot reach its push service may neither succeed nor fail: after
 * a while the switch says so, and a subscription that arrives later is dropped (nothing would register it).
 */
async function subscribe(registration, key) {
  const pending = registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
  let timer;
  const late = new Promise((resolve) => (timer = setTimeout(() => resolve(null), SUBSCRIBE_TIMEOUT_MS)));
  let subscription;
  try {
    subscription = await Promise.race([pending, late]);
  } catch (e) {
    throw new Error(`The browser’s push service refused the subscription (${e && e.message ? e.message : e}).`);
  } finally {
    clearTimeout(timer);
  }
  if (!subscription) {
    pending.then((s) => s.unsubscribe()).catch(() => {});
    throw new Error("The browser’s push service did not answer: check the connection, then try again.");
  }
  return subscription;
}

/** `api` or a list of them: one per pairing (the browser has one subscription, each paired device registers it). */
const many = (api) => (Array.isArray(api) ? api : api ? [api] : []);

/**
 * Turns notifications on: asks for the permission (call it from a tap: browsers ask only after a gesture),
 * subscribes with the relay's key and registers the subscription with the relay (`POST /v1/device/push`), for
 * every paired device (`api`: one device's routes, or a list).
 */
export async function enable(api) {
  const why = unsupported();
  if (why) throw new Error(why);
  const permission = await Notification.requestPermission();
  if (permission !== "granted") {
    throw new Error(
      permission === "denied"
        ? "Notifications are blocked for this site: allow them in the browser’s site settings."
        : "Notifications were not allowed.",
    );
  }
  const [registration, key] = await Promise.all([worker(), relayKey()]);
  let subscription = await registration.pushManager.getSubscription();
  if (subscription && !sameKey(subscription, key)) {
    await subscription.unsubscribe();
    subscription = null;
  }
  if (!subscription) subscription = await subscribe(registration, key);
  try {
    for (const one of many(api)) await one.registerPush(subscription.toJSON());
  } catch (e) {
    // Not registered: nothing would ever arrive, so the subscription is not kept either.
    await subscription.unsubscribe().catch(() => {});
    throw e;
  }
  return subscription;
}

/**
 * Turns notifications off: the relay forgets the subscription (`DELETE /v1/device/push`; skipped without `api`, for
 * a revoked device, whose subscriptions the relay already dropped), then the browser.
 */
export async function disable(api) {
  const registration = await existing();
  const subscription = registration ? await registration.pushManager.getSubscription() : null;
  if (!subscription) return;
  try {
    for (const one of many(api)) await one.unregisterPush(subscription.endpoint);
  } finally {
    await subscription.unsubscribe().catch(() => {});
  }
}

/**
 * At each start, when notifications are on: registers the subscription again (the relay replaces its keys, or
 * learns it again after losing it), and subscribes again when the relay's key changed. Errors are returned, not
 * thrown: the conversation works without push.
 */
export async function refresh(api) {
  try {
    if (unsupported() || Notification.permission !== "granted") return null;
    const registration = await existing();
    let subscription = registration ? await registration.pushManager.getSubscription() : null;
    if (!subscription) return null;
    await registration.update().catch(() => {});
    const key = await relayKey();
    if (!sameKey(subscription, key)) {
      await subscription.unsubscribe();
      subscription = await subscribe(registration, key);
    }
    for (const one of many(api)) await one.registerPush(subscription.toJSON());
    return null;
  } catch (e) {
    return e;
  }
}

/**
 * One device leaves while others stay paired here: the relay forgets the subscription for that device only, and
 * the browser keeps it for the others.
 */
export async function forget(api) {
  const registration = await existing();
  const subscription = registration ? await registration.pushManager.getSubscription() : null;
  if (subscription) await api.unregisterPush(subscription.endpoint);
}
