// The Pacerelle web app: pairing at /pair, then the conversation with the agent at /.
//
// Everything sent is sealed here and everything received is opened here (crypto.js, WebCrypto); the relay
// only stores and forwards envelopes. The pairing secret is read from the link's fragment, which browsers
// never send, and is removed from the address bar at once; it is never sent anywhere.
//
// This is the entry point: it starts the page (boot) and wires its controls. The state is state.js's; each screen
// has its module (pairing.js, conversation.js with thread.js and questions-ui.js, sending.js, agents.js,
// settings.js).

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as push from "./push.js";
import { app, MAX_TEXT_BYTES } from "./state.js";
import { $, toast } from "./dom.js";
import { kib } from "./format.js";
import { onSettings, onSwitchAgent, showScreen } from "./screens.js";
import { nearBottom } from "./thread.js";
import { focusQuestion, onAnswerQueued } from "./questions-ui.js";
import { flushOutbox, reconnectNow, sendTask } from "./sending.js";
import { wireSettings } from "./settings.js";
import { startConversation, switchTo } from "./conversation.js";
import { loadPending, presenceLoop, questionsArrived, refreshWaiting, showPending, wireAgents } from "./agents.js";
import { onAgentQuestions } from "./watch.js";
import { saveDraft } from "./drafts.js";
import { startPairing } from "./pairing.js";

/** Starts the page: pairing at /pair, else the conversation of the pairing chosen, or the unpaired screen. */
async function boot() {
  if (!window.isSecureContext || !globalThis.crypto || !globalThis.crypto.subtle) {
    showScreen("insecure");
    return;
  }
  if (location.pathname === "/pair") {
    await startPairing();
    return;
  }
  // `?agent=` (the switcher, a notification): that agent's conversation is the one shown from now on.
  const params = new URLSearchParams(location.search);
  const chosen = params.get("agent");
  if (chosen) {
    if (await store.loadDevice(chosen)) await store.selectDevice(chosen);
    params.delete("agent");
    const query = params.toString();
    history.replaceState(null, "", "/" + (query ? `?${query}` : "") + location.hash);
  }
  app.pairings = await store.listDevices();
  const device = await store.loadDevice();
  if (!device) {
    showScreen("unpaired");
    return;
  }
  await startConversation(device);
  if (app.pairings.length === 1) refreshWaiting();
  if (app.pairings.length > 1) {
    presenceLoop();
    // On open, the questions waiting across all agents come first (not when a notification or the switcher chose).
    const opening = !chosen && !params.get("question") && !onSettings();
    const waiting = await loadPending();
    if (opening && waiting.length > 0 && document.body.dataset.screen === "conversation") showPending(waiting);
  }
}

/**
 * The composer is fixed over the bottom of the page and grows with its text: the page keeps room for it
 * (--composer-h: the conversation's bottom padding, and the scroll padding that `scrollIntoView` keeps
 * clear), so no card ever ends under it.
 */
function keepRoomForComposer() {
  const composer = $("composer");
  let height = -1;
  const update = () => {
    const h = composer.hidden ? 0 : composer.offsetHeight;
    if (h === height) return;
    const stick = nearBottom();
    height = h;
    document.documentElement.style.setProperty("--composer-h", `${h}px`);
    if (stick) window.scrollTo(0, document.documentElement.scrollHeight);
  };
  new ResizeObserver(update).observe(composer);
  update();
}

/**
 * The header, the switcher and the banners are pinned at the top together (.chrome): the page keeps room for them
 * (--chrome-h: the scroll padding that `scrollIntoView` keeps clear), whatever their height.
 */
function keepRoomForChrome() {
  const chrome = $("chrome");
  const update = () => document.documentElement.style.setProperty("--chrome-h", `${chrome.offsetHeight}px`);
  new ResizeObserver(update).observe(chrome);
  update();
}

/** Wires the page's controls once: the composer, the settings, the revoked screen, the switcher, the worker's taps. */
function wire() {
  keepRoomForComposer();
  keepRoomForChrome();
  // Another agent's conversation is shown in place, without a reload (its draft kept).
  onSwitchAgent(switchTo);
  // A question (or its new state) from an agent watched in the background: counted, and announced at the top.
  onAgentQuestions(questionsArrived);
  // An answer given with a question's buttons is queued, then sent by the outbox.
  onAnswerQueued(flushOutbox);
  const input = $("task-text");
  const grow = () => {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
  };
  // Never cut: a text over the limit stays whole in the box, is refused with the limit shown, and nothing is sent.
  const tooLong = () => {
    const bytes = c.encodeUtf8(input.value).length;
    const note = $("too-long");
    const over = bytes > MAX_TEXT_BYTES;
    note.hidden = !over;
    $("composer").classList.toggle("over", over);
    if (over) {
      note.textContent = `Too long to send: ${kib(bytes)} of UTF-8, the limit is ${kib(MAX_TEXT_BYTES)} (${MAX_TEXT_BYTES.toLocaleString("en")} bytes). Shorten it: nothing was sent.`;
    }
    return over;
  };
  input.addEventListener("input", () => {
    grow();
    tooLong();
    if (app.device) saveDraft(app.device.agentId, input.value);
  });
  // Enter sends, on every platform (a phone has no Ctrl; its keyboard's key says "send": enterkeyhint);
  // Shift+Enter is a new line. Ctrl/Cmd+Enter sends too. Not while an input method composes a word.
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter" || event.isComposing || event.keyCode === 229) return;
    if (event.shiftKey && !(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    $("composer").requestSubmit();
  });
  $("composer").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value;
    if (!text.trim() || !app.device) return;
    if (tooLong()) {
      toast(`This task is too long: ${kib(MAX_TEXT_BYTES)} of UTF-8 at most. Nothing was sent.`);
      return;
    }
    input.value = "";
    grow();
    tooLong();
    const agentId = app.device.agentId;
    saveDraft(agentId, "");
    try {
      await sendTask(text);
    } catch (e) {
      input.value = text;
      saveDraft(agentId, text);
      toast(`Could not send: ${e.message}`);
    }
    input.focus();
  });
  wireSettings();
  $("forget-revoked").addEventListener("click", async () => {
    // The relay already dropped a revoked device's subscriptions; the browser keeps its own for the other agents.
    const others = app.pairings.filter((d) => d.agentId !== app.revokedAgentId);
    if (others.length === 0) await push.disable(null).catch(() => {});
    await store.forgetDevice(app.revokedAgentId || undefined);
    location.replace("/");
  });
  wireAgents();
  $("notice-close").addEventListener("click", () => ($("notice").hidden = true));
  window.addEventListener("online", reconnectNow);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible" && app.connected === false) reconnectNow();
  });
  // A tap on a notification while the app is open: the worker names the question to show.
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.addEventListener("message", (event) => {
      const data = event.data || {};
      if (data.type !== "open") return;
      if (data.agentId && (!app.device || data.agentId !== app.device.agentId) && app.pairings.some((d) => d.agentId === data.agentId)) {
        // Another agent's question: its conversation opens on it (in place, the draft kept).
        if (app.stopped) {
          const q = new URLSearchParams({ agent: data.agentId });
          if (data.questionId) q.set("question", data.questionId);
          location.assign(`/?${q}`);
          return;
        }
        switchTo(data.agentId).then(() => {
          if (data.questionId) {
            app.focus = data.questionId;
            focusQuestion(data.questionId);
          }
        });
        return;
      }
      if (!app.device) return;
      // An answer the worker could not send is in the outbox: sent (or its refusal explained) from here.
      flushOutbox();
      if (document.body.dataset.screen === "settings") $("settings-back").click();
      else if (document.body.dataset.screen !== "conversation") {
        if (onSettings()) history.replaceState(null, "", "/");
        showScreen("conversation");
      }
      if (data.questionId) {
        app.focus = data.questionId;
        focusQuestion(data.questionId);
      }
    });
  }
}

wire();
boot().catch((e) => {
  showScreen("unpaired");
  toast(`Something went wrong: ${e && e.message ? e.message : e}`);
});
