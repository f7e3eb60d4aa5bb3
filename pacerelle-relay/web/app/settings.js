// The settings screen (this pairing's facts, its signing key, notifications, unpairing) and the grants screen under
// it (grant-ui.js). Both have an address (#settings, #grants), so that the back button and a reload keep them.

import { saveDraft } from "./drafts.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import * as push from "./push.js";
import * as grantUi from "./grant-ui.js";
import { deviceApi, isRevocation, relayApi } from "./api.js";
import { app } from "./state.js";
import { $, el, toast } from "./dom.js";
import { dateTime } from "./format.js";
import { revoked, showScreen } from "./screens.js";

/** The grants screen (grant-ui.js): this agent's grants, with what each allows, its uses, and Revoke for an owner. */
export function showGrantsScreen() {
  showScreen("grants");
  window.scrollTo(0, 0);
  if (!app.device) return;
  grantUi.showGrants({ list: $("grants-list"), status: $("grants-status") }, app.device, app.api, (e) => {
    if (!isRevocation(e)) return false;
    revoked();
    return true;
  });
}

/** Fills the settings screen: local facts at once, then what the relay says (device, version, push). */
export async function renderSettings() {
  const d = app.device;
  if (!d) return;
  $("s-agent").textContent = d.agentName;
  $("s-user").textContent = d.user ? d.user.name : "";
  $("s-user").hidden = $("s-user-label").hidden = !d.user;
  $("s-relay").textContent = location.host;
  $("s-device").textContent = d.deviceName;
  $("s-device-id").textContent = d.deviceId;
  $("s-role").textContent = d.role === "owner" ? "Owner: sends tasks and answers questions" : "Answers questions";
  $("s-paired").textContent = d.pairedAt ? dateTime(d.pairedAt) : "";
  // Grants are listed and revoked by owner devices only.
  $("s-grants-panel").hidden = d.role !== "owner";
  renderSigning(d);
  $("unpair-confirm").hidden = true;
  $("unpair").hidden = false;
  // Several agents paired here: unpairing is this agent's only, the others keep working.
  const multi = app.pairings.length > 1;
  $("unpair").textContent = multi ? `Unpair from “${d.agentName}”` : "Unpair this browser";
  $("unpair-yes").textContent = multi ? `Unpair from “${d.agentName}”` : "Unpair";
  $("unpair-question").replaceChildren(
    el("strong", null, multi ? `Unpair from “${d.agentName}”?` : "Unpair this browser?"),
    multi
      ? ` The relay revokes this device for ${d.agentName}, and its key and conversation are deleted here. The other agents paired here are kept. To answer ${d.agentName} here again you will need a new pairing link.`
      : " The relay revokes this device, and its key and conversation are deleted here. To use Pacerelle here again you will need a new pairing link.",
  );
  renderPush();
  relayApi
    .health()
    .then((h) => ($("s-version").textContent = `Pacerelle ${h.version} (this relay and its web app)`))
    .catch(() => ($("s-version").textContent = "Unknown: the relay cannot be reached"));
  try {
    const me = await app.api.me();
    $("s-agent").textContent = me.agent.name;
    $("s-device").textContent = me.device.name;
    $("s-paired").textContent = dateTime(me.device.createdAt);
  } catch (e) {
    if (isRevocation(e)) revoked();
  }
}

const SIGNING_HELP = {
  signed:
    "Every answer from this browser is signed with a key made here, which never leaves it. The agent's answer log lists the same fingerprint: compare them to check that an approval came from this device.",
  pending:
    "This browser has its signing key, but the relay does not list it yet: answers are sealed end to end but unsigned until it does, and an agent that requires signed answers (every new agent does) refuses them. The key is sent again when the app next starts.",
  conflict:
    "The relay lists another signing key for this device: its answers will be refused. Unpair this browser and pair it again.",
  unsigned:
    "This browser has no Ed25519 in WebCrypto, so it cannot sign: answers are sealed end to end but not signed. An agent that requires signed answers (every new agent does) refuses them, and an answer log export cannot prove they came from this browser. After a browser update the app makes a key and registers it at its next start.",
};

/** The signing key's fingerprint and what it means (`answers.signingStatus`). */
async function renderSigning(d) {
  const { state, fingerprint } = await answers.signingStatus(d);
  const dd = $("s-signing");
  dd.dataset.state = state;
  dd.textContent = "";
  if (fingerprint) dd.append(el("code", "fingerprint", fingerprint));
  if (state !== "signed") dd.append(el("span", "tag", state === "unsigned" ? "none: cannot sign" : state));
  $("s-signing-help").textContent = SIGNING_HELP[state];
}

let pushBusy = false;

async function renderPush(error) {
  const sw = $("push-switch");
  const st = await push.status();
  sw.checked = st.state === "on";
  sw.disabled = pushBusy || st.state === "unsupported" || st.state === "denied";
  sw.closest(".switch-row").dataset.state = st.state;
  $("push-text").textContent = pushBusy ? (sw.checked ? "Turning off…" : "Turning on…") : st.text;
  const err = $("push-error");
  err.hidden = !error;
  err.textContent = error ? (error.message || String(error)) : "";
}

export function wireSettings() {
  const open = () => {
    if (location.hash !== "#settings") history.pushState({ settings: true }, "", "#settings");
    showScreen("settings");
    renderSettings();
    window.scrollTo(0, 0);
  };
  $("open-settings").addEventListener("click", open);
  $("settings-back").addEventListener("click", () => {
    if (history.state && history.state.settings) {
      history.back();
    } else {
      // Opened at #settings (a reload): there is no conversation entry to go back to.
      history.replaceState(null, "", "/");
      showScreen("conversation");
    }
  });
  window.addEventListener("popstate", () => {
    if (!app.device || app.stopped) return;
    if (location.hash === "#settings") open();
    else if (location.hash === "#grants") showGrantsScreen();
    else showScreen("conversation");
  });
  $("open-grants").addEventListener("click", () => {
    if (location.hash !== "#grants") history.pushState({ grants: true }, "", "#grants");
    showGrantsScreen();
  });
  $("grants-back").addEventListener("click", () => {
    if (history.state && history.state.grants) {
      history.back();
    } else {
      // Opened at #grants (a reload): the settings are under it.
      history.replaceState(null, "", "#settings");
      open();
    }
  });
  // Turning notifications on asks for the permission: only from this tap, as browsers require.
  $("push-switch").addEventListener("change", async (event) => {
    const on = event.target.checked;
    pushBusy = true;
    await renderPush();
    $("push-switch").checked = on;
    let error = null;
    // One subscription for this browser, registered with every paired device (the current one first).
    const apis = [app.api, ...app.pairings.filter((d) => d.agentId !== app.device.agentId).map((d) => deviceApi(d.deviceToken))];
    try {
      if (on) await push.enable(apis);
      else await push.disable(apis.map((a, i) => (i === 0 ? a : { unregisterPush: (e) => a.unregisterPush(e).catch(() => {}) })));
    } catch (e) {
      if (isRevocation(e)) return revoked();
      error = e;
    }
    pushBusy = false;
    await renderPush(error);
  });
  $("unpair").addEventListener("click", () => {
    $("unpair").hidden = true;
    $("unpair-confirm").hidden = false;
    $("unpair-cancel").focus();
  });
  $("unpair-cancel").addEventListener("click", () => {
    $("unpair-confirm").hidden = true;
    $("unpair").hidden = false;
  });
  $("unpair-yes").addEventListener("click", unpair);
}

/** Unpairs: the relay forgets this browser's push subscription and revokes the device; then everything here goes. */
async function unpair() {
  $("unpair-yes").disabled = true;
  const api = app.api;
  const agentId = app.device ? app.device.agentId : undefined;
  const others = app.pairings.filter((d) => d.agentId !== agentId);
  if (api) {
    // The other agents keep the browser's subscription: only this device's registration goes.
    if (others.length > 0) await push.forget(api).catch(() => {});
    else await push.disable(api).catch(() => {});
    try {
      await api.leave();
    } catch (e) {
      if (!isRevocation(e)) {
        $("unpair-yes").disabled = false;
        toast(`The relay could not be reached (${e.message}). Nothing was deleted: try again.`);
        return;
      }
    }
  }
  app.stopped = true;
  await store.forgetDevice(agentId);
  saveDraft(agentId, "");
  location.replace("/");
}
