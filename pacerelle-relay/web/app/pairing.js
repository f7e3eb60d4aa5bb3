// Pairing at /pair: the link's fragment holds the pairing secret, which browsers never send; it is removed from the
// address bar at once and never sent anywhere. The offer is opened with it, shown, and claimed under a name.

import * as c from "./crypto.js";
import * as store from "./store.js";
import * as answers from "./answer.js";
import { pairingApi } from "./api.js";
import { app } from "./state.js";
import { $, notice, toast } from "./dom.js";
import { showScreen } from "./screens.js";
import { applyLook } from "./partner.js";
import { startConversation } from "./conversation.js";
import { presenceLoop, refreshWaiting } from "./agents.js";

/** What a refused pairing says, by the error's kind: what happened, and what to do, in the app's words. */
const PAIRING_ERRORS = {
  not_found: "This pairing link is unknown to the relay. Ask for a new pairing link on your agent's computer and open it here.",
  pairing_claimed:
    "This pairing link was already used. Ask for a new one on your agent's computer. If you did not use it, remove the unknown device from the agent's list of devices there.",
  pairing_expired: "This pairing link has expired (a link lasts an hour). Ask for a new one on your agent's computer.",
  pairing_proof: "The relay refused this link's proof: the link is damaged. Ask for a new one.",
  rate_limited: "Too many pairing attempts from this network. Wait a minute and open the link again.",
  network: "The relay cannot be reached. Check the connection and open the link again.",
};

/** The same, short, for a browser already paired that lands in the app instead: its kind's first sentence. */
const LANDING = {
  not_found: "This pairing link is unknown to the relay",
  pairing_claimed: "This link was already used",
  pairing_expired: "This link has expired",
};

/**
 * A link that cannot pair (used, expired, unknown) opened in a browser already paired: no dead end, the app opens
 * with what happened and the agents paired here. Returns false when nothing is paired here (the error is shown).
 */
async function landInApp(kind) {
  const pairings = await store.listDevices();
  if (pairings.length === 0 || !LANDING[kind]) return false;
  history.replaceState(null, "", "/");
  app.pairings = pairings;
  await startConversation(await store.loadDevice());
  refreshWaiting();
  if (app.pairings.length > 1) presenceLoop();
  const names = pairings.map((d) => d.agentName).join(", ");
  notice(`${LANDING[kind]} — you are paired with: ${names}. To add an agent, open a new pairing link from its computer.`);
  return true;
}

function pairError(text) {
  $("pair-status").hidden = true;
  $("pair-form").hidden = true;
  const err = $("pair-error");
  err.textContent = text;
  err.hidden = false;
}

function guessDeviceName() {
  const ua = navigator.userAgent;
  if (/iPhone/.test(ua)) return "iPhone";
  if (/iPad/.test(ua)) return "iPad";
  if (/Android/.test(ua)) return /Mobile/.test(ua) ? "Android phone" : "Android tablet";
  return "Web browser";
}

export async function startPairing() {
  const fragment = location.hash;
  // The secret leaves the address bar (and the history entry) at once; it stays in this function only.
  history.replaceState(null, "", "/pair");
  showScreen("pair");
  let secret;
  try {
    secret = c.parseFragment(fragment);
  } catch {
    const existing = await store.loadDevice();
    if (existing) {
      location.replace("/");
      return;
    }
    pairError("This pairing link is incomplete. Open the whole link, or scan the QR code again.");
    return;
  }
  const p = await c.pairingValues(secret);
  secret.fill(0);
  let offer;
  try {
    offer = await pairingApi.offer(p.pairingId);
  } catch (e) {
    if (await landInApp(e.kind)) return;
    pairError(PAIRING_ERRORS[e.kind] || `The relay refused the link (${e.message}).`);
    return;
  }
  let payload;
  try {
    payload = await c.openOffer(p.pairingKey, p.pairingId, offer.agentId, offer.deviceId, offer.offer);
  } catch {
    pairError("The offer does not open with this link: the link is damaged, or the relay served another offer. Nothing was paired.");
    return;
  }
  const key = await c.importKey(payload.deviceKeyBytes);
  // One pairing per agent: the same agent's is replaced, another agent's are kept beside it.
  const existing = await store.loadDevice(payload.agentId);
  const others = (await store.listDevices()).filter((d) => d.agentId !== payload.agentId);

  $("pair-status").hidden = true;
  $("pair-agent").textContent = payload.agentName;
  $("pair-role").textContent = payload.role === "owner" ? "owner" : "answers questions";
  // Partner mode: the product's name, icon and colour, and who this device will answer as, before accepting.
  if (payload.user || payload.branding) {
    applyLook(payload);
    $("agent-name").textContent = payload.agentName;
    const icon = payload.branding && payload.branding.icon;
    $("pair-icon").hidden = !icon;
    if (icon) $("pair-icon").src = icon;
  }
  if (payload.user) {
    $("pair-user-name").textContent = payload.user.name;
    $("pair-user").hidden = false;
  }
  if (existing) {
    const replace = $("pair-replace");
    replace.textContent = `This browser is paired with “${existing.agentName}” already. Pairing again replaces that pairing here; the other agents paired here stay as they are.`;
    replace.hidden = false;
  } else if (others.length > 0) {
    const add = $("pair-replace");
    const names = others.map((d) => `“${d.agentName}”`).join(", ");
    add.textContent = `This browser is also paired with ${names}. This agent is added beside ${others.length > 1 ? "them" : "it"}: switch between them at the top.`;
    add.hidden = false;
  }
  // One name per browser: the one given at the last pairing here is offered again (editable); else the label the
  // agent gave this pairing (`pacerelle pair --name`, in clear at the relay: only a suggestion); else a guess.
  const named = [...others, ...(existing ? [existing] : [])]
    .filter((d) => d.deviceName)
    .sort((a, b) => String(a.pairedAt || "").localeCompare(String(b.pairedAt || "")))
    .pop();
  const label = typeof offer.label === "string" ? offer.label.trim() : "";
  const name = $("pair-name");
  name.value = named ? named.deviceName : label || guessDeviceName();
  $("pair-form").hidden = false;

  $("pair-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const deviceName = name.value.trim();
    if (!deviceName || [...deviceName].length > 100) {
      toast("A device name has 1 to 100 characters.");
      return;
    }
    $("pair-submit").disabled = true;
    $("pair-status").textContent = "Pairing…";
    $("pair-status").hidden = false;
    // This device's signing key (docs/crypto.md §4.8): the agent gets it sealed with the device key, so the relay
    // cannot substitute it. None where WebCrypto has no Ed25519: the pairing goes on, and answers go unsigned.
    const signing = await answers.newSigningKey();
    const sealedKey = signing
      ? await c.sealSigningKey(key, payload.agentId, payload.deviceId, c.b64decode(signing.signingKey))
      : null;
    let claimed;
    try {
      // Never retried: a claim is single use, and an answer lost in transit cannot claim twice.
      claimed = await pairingApi.claim(p.pairingId, c.b64encode(p.claimSecret), deviceName, sealedKey);
    } catch (e) {
      if (e.kind === "network") {
        pairError("The relay's answer was lost: the link may have been used. Open the app; if it is not paired, ask for a new link.");
      } else {
        pairError(PAIRING_ERRORS[e.kind] || `The relay refused the pairing (${e.message}).`);
      }
      return;
    }
    if (claimed.agentId !== payload.agentId || claimed.deviceId !== payload.deviceId) {
      pairError("The relay's answer does not match the offer. Nothing was stored; revoke the new device on the computer.");
      return;
    }
    try {
      c.splitBearer(claimed.deviceToken);
    } catch {
      pairError("The relay returned a malformed credential.");
      return;
    }
    const device = {
      v: 1,
      agentId: payload.agentId,
      agentName: payload.agentName,
      deviceId: payload.deviceId,
      deviceName,
      role: payload.role,
      deviceToken: claimed.deviceToken,
      key,
      pairedAt: new Date().toISOString(),
    };
    // Partner mode: the user this device answers for, and the product's look, kept with the pairing.
    if (payload.user) device.user = payload.user;
    if (payload.branding) device.branding = payload.branding;
    // Registered once the relay lists it (checked at the start of the conversation: an older relay ignores it).
    if (signing) device.signing = signing;
    if (existing) await store.forgetDevice(payload.agentId);
    await store.saveDevice(device, payload.deviceKeyBytes);
    await store.selectDevice(payload.agentId);
    payload.deviceKeyBytes.fill(0);
    if (navigator.storage && navigator.storage.persist) navigator.storage.persist().catch(() => {});
    history.replaceState(null, "", "/");
    app.pairings = await store.listDevices();
    await startConversation(await store.loadDevice(payload.agentId));
    refreshWaiting();
    if (app.pairings.length > 1) presenceLoop();
  });
  name.focus();
}
