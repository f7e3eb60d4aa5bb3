// The web app's crypto module (web/app/crypto.js) against the known-answer vectors of the Rust core
// (pacerelle-core/tests/vectors/, docs/crypto.md §8), and the app's other modules that run in node (its backoff,
// the tests' own Web Push decryption). Run: node --test crypto.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

import * as c from "../web/app/crypto.js";

const vectors = (name) =>
  JSON.parse(readFileSync(fileURLToPath(new URL(`../../pacerelle-core/tests/vectors/${name}.json`, import.meta.url)), "utf8"))
    .cases;
const utf8 = (s) => new TextEncoder().encode(s);
const d = c.b64decode;
const e = c.b64encode;

async function refuses(promiseOrFn, kind) {
  try {
    await (typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn);
  } catch (err) {
    assert.ok(err instanceof c.CryptoError, `expected a CryptoError, got ${err}`);
    if (kind) assert.equal(err.kind, kind);
    return err;
  }
  assert.fail("accepted what it must refuse");
}

test("token.json", async (t) => {
  for (const v of vectors("token")) {
    await t.test(`${v.type}: ${v.name}`, async () => {
      switch (v.type) {
        case "agentToken": {
          const { token, checksum } = await c.agentToken(d(v.auth), d(v.master));
          assert.equal(e(checksum), v.checksum);
          assert.equal(token, v.token);
          assert.equal(`${v.agentId}.${v.auth}`, v.bearer);
          assert.equal(e(await c.sha256(d(v.auth))), v.authHash);
          const parsed = await c.parseAgentToken(v.token);
          assert.equal(e(parsed.auth), v.auth);
          assert.equal(e(parsed.master), v.master);
          const split = c.splitBearer(v.bearer);
          assert.equal(split.principalId, v.agentId);
          assert.equal(e(await c.sha256(split.secret)), v.authHash);
          break;
        }
        case "deviceBearer": {
          assert.equal(`${v.deviceId}.${e(d(v.secret))}`, v.bearer);
          assert.equal(e(await c.sha256(d(v.secret))), v.secretHash);
          const split = c.splitBearer(v.bearer);
          assert.equal(split.principalId, v.deviceId);
          assert.equal(e(await c.sha256(split.secret)), v.secretHash);
          break;
        }
        case "invalidToken":
          await refuses(c.parseAgentToken(v.token));
          break;
        case "invalidBearer":
          await refuses(() => c.splitBearer(v.bearer));
          break;
        default:
          assert.fail(`unknown case type ${v.type}`);
      }
    });
  }
});

test("kdf.json", async (t) => {
  for (const v of vectors("kdf")) {
    await t.test(`${v.type}: ${v.name}`, async () => {
      if (v.type === "hkdf") {
        assert.equal(e(await c.hkdf(d(v.ikm), d(v.salt), d(v.info))), v.okm);
      } else if (v.type === "contentKeys") {
        assert.equal(v.deviceInfo, "pacerelle/v1/device/" + v.deviceId);
        const keys = await c.contentKeys(d(v.master), v.agentId, v.deviceId);
        assert.equal(e(keys.deviceKey), v.deviceKey);
        assert.equal(e(keys.selfKey), v.selfKey);
      } else {
        assert.fail(`unknown case type ${v.type}`);
      }
    });
  }
});

test("pairing.json", async (t) => {
  for (const v of vectors("pairing")) {
    await t.test(`${v.type}: ${v.name}`, async () => {
      if (v.type === "invalidLink") {
        await refuses(() => c.parseLink(v.link));
        return;
      }
      assert.equal(v.type, "pairing");
      const secret = d(v.secret);
      const p = await c.pairingValues(secret);
      assert.equal(p.pairingId, v.pairingId);
      assert.equal(e(p.pairingKey), v.pairingKey);
      assert.equal(e(p.claimSecret), v.claimSecret);
      assert.equal(e(p.claimHash), v.claimHash);
      assert.equal(c.pairingLink(v.relayUrl, secret), v.link);
      assert.equal(c.pairingLink(v.relayUrl + "/", secret), v.link);
      const parsed = c.parseLink(v.link);
      assert.equal(parsed.relayUrl, v.relayUrl.replace(/\/+$/, ""));
      assert.equal(e(parsed.secret), v.secret);
      // What the /pair page reads from location.hash.
      assert.equal(e(c.parseFragment(v.link.slice(v.link.indexOf("#")))), v.secret);

      const o = v.offer;
      assert.equal(e(c.aad(o.aadFields)), o.aad);
      assert.deepEqual(c.context.offer(o.aadFields.agentId, o.aadFields.deviceId, p.pairingId), o.aadFields);
      assert.equal(await c.sealWithNonce(p.pairingKey, o.aadFields, d(o.nonce), utf8(o.offerJson)), o.sealedOffer);
      const offer = await c.openOffer(p.pairingKey, p.pairingId, o.aadFields.agentId, o.aadFields.deviceId, o.sealedOffer);
      const { deviceKeyBytes, ...payload } = offer;
      assert.deepEqual(payload, JSON.parse(o.offerJson));
      assert.equal(deviceKeyBytes.length, 32);
      // The key imported non-extractable, as the app keeps it, still opens with the same bytes.
      const key = await c.importKey(p.pairingKey);
      assert.equal(key.extractable, false);
      assert.equal(c.decodeUtf8(await c.open(key, o.aadFields, o.sealedOffer)), o.offerJson);
      for (const wrong of v.mustNotOpenWith) {
        await refuses(
          c.openOffer(p.pairingKey, p.pairingId, wrong.agentId, wrong.deviceId, o.sealedOffer),
          "open",
        );
      }
    });
  }
});

test("Partner-mode offers: the user and the branding are kept; a wrong branding is dropped, anything malformed refused", async (t) => {
  const secret = c.randomBytes(32);
  const p = await c.pairingValues(secret);
  const agentId = "ag_partner";
  const deviceId = "dv_alice_phone";
  const base = {
    v: 1,
    agentId,
    agentName: "Shop assistant",
    deviceId,
    deviceKey: e(c.randomBytes(32)),
    role: "user",
    expiresAt: "2030-01-01T00:00:00Z",
  };
  const seal = (offer) => c.sealJson(p.pairingKey, c.context.offer(agentId, deviceId, p.pairingId), offer);
  const open = async (offer) => {
    const { deviceKeyBytes, ...payload } = await c.openOffer(p.pairingKey, p.pairingId, agentId, deviceId, await seal(offer));
    assert.equal(deviceKeyBytes.length, 32);
    return payload;
  };
  const svg = `data:image/svg+xml;base64,${Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>').toString("base64")}`;
  const user = { externalId: "alice", name: "Alice" };

  await t.test("an owner offer opens as before", async () => {
    assert.deepEqual(await open({ ...base, role: "owner" }), { ...base, role: "owner" });
  });
  await t.test("user and branding are kept", async () => {
    const branding = { accentColor: "#0a7D5a", icon: svg };
    assert.deepEqual(await open({ ...base, user, branding }), { ...base, user, branding });
    assert.deepEqual(await open({ ...base, user }), { ...base, user });
    for (const b of [{}, { accentColor: "#000000" }, { icon: "data:image/png;base64,iVBORw0KGgo=" }, { icon: "data:image/jpeg;base64,/9j/4A==" }]) {
      assert.deepEqual(await open({ ...base, user, branding: b }), { ...base, user, branding: b });
    }
    // null is an absent member (serde's Option), and is left out.
    assert.deepEqual(await open({ ...base, user: null, branding: null }), base);
    assert.deepEqual(await open({ ...base, user, branding: { accentColor: null, icon: svg } }), { ...base, user, branding: { icon: svg } });
  });
  await t.test("a branding with a wrong value is dropped, and the offer still opens", async () => {
    const wrong = [
      { accentColor: "0a7d5a" },
      { accentColor: "#0a7d5" },
      { accentColor: "#0a7d5ag" },
      { accentColor: "#zzzzzz" },
      { accentColor: "red" },
      { accentColor: "#0a7d5a\n" },
      { accentColor: "#0a7d5a", icon: "https://example.com/icon.png" },
      { icon: "data:image/gif;base64,R0lGOD==" },
      { icon: "data:image/png;base64," },
      { icon: "data:image/png;base64,<svg>" },
      { icon: "data:image/svg+xml,<svg/>" },
      { icon: `data:image/png;base64,${"A".repeat(c.MAX_ICON_LEN)}` },
    ];
    for (const branding of wrong) {
      assert.notEqual(c.brandingProblem(branding), null, JSON.stringify(branding).slice(0, 60));
      assert.deepEqual(await open({ ...base, user, branding }), { ...base, user }, JSON.stringify(branding).slice(0, 60));
    }
    // At the limit exactly: kept.
    const prefix = "data:image/png;base64,";
    const biggest = { icon: prefix + "A".repeat(c.MAX_ICON_LEN - prefix.length) };
    assert.equal(c.brandingProblem(biggest), null);
    assert.deepEqual(await open({ ...base, user, branding: biggest }), { ...base, user, branding: biggest });
  });
  await t.test("unknown members and malformed users or brandings are refused", async () => {
    const refused = [
      { ...base, extra: 1 },
      { ...base, user, users: [user] },
      { ...base, user: { externalId: "alice" } },
      { ...base, user: { name: "Alice" } },
      { ...base, user: { externalId: "", name: "Alice" } },
      { ...base, user: { externalId: "alice", name: "" } },
      { ...base, user: { externalId: 42, name: "Alice" } },
      { ...base, user: { ...user, email: "alice@example.com" } },
      { ...base, user: "alice" },
      { ...base, user: [user] },
      { ...base, user, branding: "#0a7d5a" },
      { ...base, user, branding: [] },
      { ...base, user, branding: { accentColor: "#0a7d5a", logo: svg } },
      { ...base, user, branding: { accentColor: 0x0a7d5a } },
    ];
    for (const offer of refused) {
      const err = await refuses(async () => open(offer), "malformed");
      assert.doesNotMatch(err.message, /alice|Alice|svg/, "an error never carries the offer's content");
    }
    const { expiresAt: _gone, ...missing } = { ...base, user };
    await refuses(async () => open(missing), "malformed");
  });
});

test("envelope.json", async (t) => {
  for (const v of vectors("envelope")) {
    await t.test(`${v.type}: ${v.name}`, async () => {
      assert.equal(e(c.aad(v.aadFields)), v.aad);
      const key = await c.importKey(d(v.key));
      if (v.type === "seal") {
        assert.equal(e(utf8(v.plaintext)), v.plaintextBytes);
        assert.equal(await c.sealWithNonce(key, v.aadFields, d(v.nonce), utf8(v.plaintext)), v.envelope);
        assert.equal(e(await c.open(key, v.aadFields, v.envelope)), v.plaintextBytes);
        // A fresh seal opens to the same plaintext and differs from the vector (random nonce).
        const fresh = await c.seal(key, v.aadFields, utf8(v.plaintext));
        assert.notEqual(fresh, v.envelope);
        assert.equal(e(await c.open(key, v.aadFields, fresh)), v.plaintextBytes);
        if (v.plaintext.startsWith("{")) {
          // JSON payloads: what JSON.stringify writes is byte for byte what the Rust writer wrote.
          assert.equal(JSON.stringify(JSON.parse(v.plaintext)), v.plaintext);
          assert.deepEqual(await c.openJson(key, v.aadFields, v.envelope), JSON.parse(v.plaintext));
        }
      } else if (v.type === "reject") {
        await refuses(c.open(key, v.aadFields, v.envelope), v.error);
      } else {
        assert.fail(`unknown case type ${v.type}`);
      }
    });
  }
});

test("question.json: the digest an answer names", async (t) => {
  for (const v of vectors("question").filter((v) => v.type === "questionDigest")) {
    await t.test(v.name, async () => {
      assert.equal(e(utf8(v.plaintext)), v.plaintextBytes);
      assert.equal(await c.questionDigest(d(v.plaintextBytes)), v.digest);
    });
  }
});

test("envelope.json: an answer names its question's digest, and its copy opens with the answer key", async () => {
  const cases = vectors("envelope");
  const question = cases.find((v) => v.type === "seal" && v.aadFields.kind === "question" && v.aadFields.objectId === "qst_digest");
  const answer = cases.find((v) => v.type === "seal" && v.aadFields.kind === "answer" && v.aadFields.objectId === "qst_digest");
  const copy = cases.find((v) => v.type === "seal" && v.aadFields.kind === "answer_copy");
  assert.ok(question && answer && copy, "the vectors hold a question with an answer key, its answer and its copy");
  // What the app does: open the question to its bytes, digest them, and find that digest in the answer.
  const opened = await c.openJsonBytes(d(question.key), question.aadFields, question.envelope);
  assert.equal(e(opened.plaintext), question.plaintextBytes);
  const digest = await c.questionDigest(opened.plaintext);
  assert.equal(JSON.parse(answer.plaintext).questionDigest, digest);
  // The copy: sealed with the question's answer key, in the answer_copy context of the answering device.
  assert.equal(copy.key, opened.value.answerKey);
  const { agentId, deviceId, objectId } = copy.aadFields;
  assert.deepEqual(c.context.answerCopy(agentId, deviceId, objectId), copy.aadFields);
  const key = await c.importKey(d(opened.value.answerKey));
  assert.deepEqual(await c.openJson(key, copy.aadFields, copy.envelope), JSON.parse(answer.plaintext));
  await refuses(c.openJson(key, c.context.answerCopy(agentId, "dv_other", objectId), copy.envelope), "open");
  await refuses(c.openJson(key, c.context.answer(agentId, deviceId, objectId), copy.envelope), "open");
});

/** An Ed25519 private CryptoKey from an RFC 8032 seed (PKCS #8 of RFC 8410): only the vectors need a given seed. */
const PKCS8_ED25519 = Uint8Array.from([0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]);
const ed25519FromSeed = (seed) =>
  globalThis.crypto.subtle.importKey("pkcs8", c.concat(PKCS8_ED25519, seed), { name: "Ed25519" }, true, ["sign"]);
async function publicOf(privateKey) {
  const jwk = await globalThis.crypto.subtle.exportKey("jwk", privateKey);
  return d(jwk.x);
}
const hex = (bytes) => Buffer.from(bytes).toString("hex");
/** The fields of `c.signedAnswerBytes` from a signedAnswer vector. */
const signedFields = (v) => ({
  agentId: v.agentId, deviceId: v.deviceId, questionId: v.questionId, questionDigest: v.questionDigest,
  answeredAt: v.answeredAt, answer: v.answer,
});

test("signature.json: what a device does (its key, the signed answer, its key sealed for the agent)", async (t) => {
  // What only the agent or a verifier does (refusing a sealed key, verifying an export) is not the app's part:
  // pacerelle-core's tests and the independent verifier check those cases.
  // A grant's check against the offer (rejectGrant) is the agent's: the app builds and signs a grant.
  const agentSide = ["rejectSigningKey", "export", "rejectExport", "rejectGrant"];
  const deviceSide = vectors("signature").filter((v) => !agentSide.includes(v.type));
  assert.deepEqual([...new Set(deviceSide.map((v) => v.type))].sort(), [
    "sealedSigningKey",
    "signedAnswer",
    "signedGrant",
    "signingKey",
  ]);
  for (const v of deviceSide) {
    await t.test(`${v.type}: ${v.name}`, async () => {
      switch (v.type) {
        case "signingKey": {
          const key = await ed25519FromSeed(d(v.seed));
          const raw = await publicOf(key);
          assert.equal(e(raw), v.publicKey);
          assert.equal(await c.fingerprint(raw), v.fingerprint);
          assert.match(v.fingerprint, /^[0-9a-f]{4}( [0-9a-f]{4}){5}$/);
          break;
        }
        case "signedAnswer": {
          const bytes = c.signedAnswerBytes(signedFields(v));
          assert.equal(hex(bytes), v.signedBytesHex);
          const key = await ed25519FromSeed(d(v.seed));
          assert.equal(e(await publicOf(key)), v.publicKey);
          // Ed25519 is deterministic: WebCrypto's signature is the vector's, byte for byte.
          assert.equal(await c.signAnswer(key, signedFields(v)), v.signature);
          assert.ok(await c.verify(d(v.publicKey), bytes, v.signature));
          // Any field changed: the signature no longer covers it.
          const changed = [
            { ...signedFields(v), agentId: "ag_other" },
            { ...signedFields(v), deviceId: "dv_other" },
            { ...signedFields(v), questionId: "qst_other" },
            { ...signedFields(v), questionDigest: v.questionDigest.slice(1) + "A" },
            { ...signedFields(v), answeredAt: v.answeredAt.replace(/\d(?=Z$)/, (n) => String((+n + 1) % 10)) },
            { ...signedFields(v), answer: v.answer.type === "yes" ? { type: "no" } : { type: "yes" } },
          ];
          for (const fields of changed) {
            assert.equal(await c.verify(d(v.publicKey), c.signedAnswerBytes(fields), v.signature), false, JSON.stringify(fields));
          }
          break;
        }
        case "signedGrant": {
          const fields = {
            agentId: v.agentId, deviceId: v.deviceId, questionId: v.questionId, questionDigest: v.questionDigest,
            grantedAt: v.grantedAt, grant: v.grant,
          };
          const bytes = c.signedGrantBytes(fields);
          assert.equal(hex(bytes), v.signedBytesHex);
          const key = await ed25519FromSeed(d(v.seed));
          assert.equal(await c.signGrant(key, fields), v.grant.signature);
          assert.ok(await c.verify(d(v.publicKey), bytes, v.grant.signature));
          // Widened, extended or moved: the signature no longer covers it.
          const changed = [
            { ...fields, agentId: "ag_other" },
            { ...fields, questionId: "qst_other" },
            { ...fields, grant: { ...v.grant, expiresAt: "2026-12-31T00:00:00.000Z" } },
            { ...fields, grant: { ...v.grant, scope: { ...v.grant.scope, folder: "/" } } },
            { ...fields, grant: { ...v.grant, scope: { ...v.grant.scope, command: "cargo" } } },
          ];
          for (const other of changed) {
            assert.equal(await c.verify(d(v.publicKey), c.signedGrantBytes(other), v.grant.signature), false);
          }
          break;
        }
        case "sealedSigningKey": {
          assert.deepEqual(c.context.signingKey(v.agentId, v.deviceId), v.aadFields);
          assert.equal(e(c.aad(v.aadFields)), v.aad);
          const key = await c.importKey(d(v.deviceKey));
          assert.equal(await c.sealWithNonce(key, v.aadFields, d(v.nonce), utf8(v.payloadJson)), v.envelope);
          // What the app seals at pairing: the same payload, byte for byte, under a fresh nonce.
          const sealed = await c.sealSigningKey(key, v.agentId, v.deviceId, d(v.publicKey));
          assert.equal(sealed.signingKey, v.publicKey);
          assert.notEqual(sealed.signingKeySeal, v.envelope);
          assert.equal(c.decodeUtf8(await c.open(key, v.aadFields, sealed.signingKeySeal)), v.payloadJson);
          // Bound to its device and kind: it opens as no other.
          await refuses(c.open(key, c.context.signingKey(v.agentId, "dv_other"), sealed.signingKeySeal), "open");
          await refuses(c.open(key, c.context.answer(v.agentId, v.deviceId, v.deviceId), sealed.signingKeySeal), "open");
          break;
        }
        default:
          assert.fail(`unknown case type ${v.type}`);
      }
    });
  }
});

test("signed answers: a fresh key is non-extractable, signs what the vectors' encoder builds, and refuses malformed fields", async () => {
  const pair = await c.generateSigningKey();
  assert.ok(pair, "node has Ed25519 in WebCrypto");
  assert.equal(pair.privateKey.extractable, false);
  await assert.rejects(globalThis.crypto.subtle.exportKey("pkcs8", pair.privateKey));
  assert.equal(pair.publicRaw.length, 32);
  const fields = {
    agentId: "ag_x", deviceId: "dv_y", questionId: "qst_z", questionDigest: "digest",
    answeredAt: new Date(Date.UTC(2026, 11, 1, 7, 5, 0, 7)).toISOString(),
    answer: { type: "options", value: ["b", "a"] },
  };
  assert.equal(fields.answeredAt, "2026-12-01T07:05:00.007Z");
  const signature = await c.signAnswer(pair.privateKey, fields);
  assert.equal(d(signature).length, 64);
  assert.ok(await c.verify(pair.publicRaw, c.signedAnswerBytes(fields), signature));
  // The options' order is signed.
  const reordered = { ...fields, answer: { type: "options", value: ["a", "b"] } };
  assert.equal(await c.verify(pair.publicRaw, c.signedAnswerBytes(reordered), signature), false);
  // Another key, a truncated or malformed signature: refused, never thrown.
  const other = await c.generateSigningKey();
  assert.equal(await c.verify(other.publicRaw, c.signedAnswerBytes(fields), signature), false);
  assert.equal(await c.verify(pair.publicRaw, c.signedAnswerBytes(fields), signature.slice(0, 80)), false);
  assert.equal(await c.verify(pair.publicRaw, c.signedAnswerBytes(fields), "not base64url!"), false);
  // Only the wire form of a time, and only the four answer types, are signed.
  for (const bad of [
    { ...fields, answeredAt: "2026-12-01T07:05:00Z" },
    { ...fields, answeredAt: "2026-12-01T08:05:00.007+01:00" },
    { ...fields, answer: { type: "maybe" } },
    { ...fields, answer: { type: "options", value: "a" } },
    { ...fields, answer: { type: "options", value: [1] } },
    { ...fields, answer: { type: "text" } },
    { ...fields, questionDigest: undefined },
  ]) {
    assert.throws(() => c.signedAnswerBytes(bad), c.CryptoError, JSON.stringify(bad));
  }
});

test("cursor.json", async (t) => {
  for (const v of vectors("cursor")) {
    await t.test(`${v.type}: ${v.name}`, () => {
      if (v.type === "cursor") {
        assert.equal(c.encodeCursor(BigInt(v.seq)), v.text);
        assert.equal(c.parseCursor(v.text), BigInt(v.seq));
      } else {
        assert.throws(() => c.parseCursor(v.text), c.CryptoError);
      }
    });
  }
});

test("the object contexts match the table of crypto.md §4.4", () => {
  const ids = ["ag_a", "dv_b", "obj"];
  const kinds = {
    task: ["d2a", "message"],
    reply: ["a2d", "reply"],
    question: ["a2d", "question"],
    answer: ["d2a", "answer"],
    answerCopy: ["d2a", "answer_copy"],
    notification: ["a2d", "notification"],
    offer: ["offer", "offer"],
  };
  for (const [name, [direction, kind]] of Object.entries(kinds)) {
    assert.deepEqual(c.context[name](...ids), {
      agentId: "ag_a", deviceId: "dv_b", direction, kind, objectId: "obj",
    });
  }
});

test("generated ids are valid and 128 random bits", () => {
  const seen = new Set();
  for (let i = 0; i < 200; i++) {
    const id = c.generateId("msg");
    assert.match(id, /^msg_[a-z2-7]{26}$/);
    assert.ok(c.isId(id));
    seen.add(id);
  }
  assert.equal(seen.size, 200);
  assert.ok(!c.isId(""));
  assert.ok(!c.isId("a".repeat(129)));
  assert.ok(!c.isId("é"));
});

test("the signing key's context names the device as its object (crypto.md §4.8)", () => {
  assert.deepEqual(c.context.signingKey("ag_a", "dv_b"), {
    agentId: "ag_a", deviceId: "dv_b", direction: "d2a", kind: "signing_key", objectId: "dv_b",
  });
});

test("strict base64url", () => {
  for (const bad of ["A", "AA=", "AA==", "+A", "/A", "A A", "AB", "AAB"]) {
    assert.throws(() => d(bad), c.CryptoError, bad);
  }
  assert.deepEqual(d(""), new Uint8Array());
  assert.deepEqual(d("AAA"), new Uint8Array([0, 0]));
  const big = c.randomBytes(60_000);
  assert.deepEqual(d(e(big)), big);
});

test("sealing and opening JSON, with a non-extractable key", async () => {
  const raw = c.randomBytes(32);
  const key = await c.importKey(raw);
  assert.equal(key.extractable, false);
  await assert.rejects(globalThis.crypto.subtle.exportKey("raw", key));
  const ctx = c.context.task("ag_x", "dv_y", "msg_z");
  const sealed = await c.sealJson(key, ctx, { text: "Bonjour 👋" });
  assert.deepEqual(await c.openJson(raw, ctx, sealed), { text: "Bonjour 👋" });
  await refuses(c.openJson(key, c.context.task("ag_x", "dv_y", "msg_other"), sealed), "open");
  await refuses(c.openJson(key, ctx, "AQ"), "malformed");
  const notJson = await c.seal(key, ctx, utf8("not json"));
  await refuses(c.openJson(key, ctx, notJson), "malformed");
});

// The e2e tests read the relay's pushes with webpush.mjs, a decryption of their own: it must agree with RFC 8291.
test("webpush.mjs decrypts the example of RFC 8291 (appendix A)", async () => {
  const { createECDH } = await import("node:crypto");
  const { decryptPush } = await import("./webpush.mjs");
  const b = (s) => Buffer.from(s, "base64url");
  const ua = createECDH("prime256v1");
  ua.setPrivateKey(b("q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"));
  assert.equal(
    ua.getPublicKey().toString("base64url"),
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
  );
  const body = b(
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
  );
  const auth = b("BTBZMqHH6r4Tts7J_aSIgg");
  assert.equal(decryptPush(body, ua, auth).toString("utf8"), "When I grow up, I want to be a watermelon");
  const tampered = Buffer.from(body);
  tampered[tampered.length - 1] ^= 1;
  assert.throws(() => decryptPush(tampered, ua, auth));
});

test("the app's reconnection backoff doubles to its cap, with jitter, and starts again when woken", async () => {
  const { Backoff, RETRY_FIRST_MS, RETRY_CAP_MS } = await import("../web/app/backoff.js");
  const b = new Backoff();
  const steps = [];
  for (let i = 0; i < 8; i++) steps.push(b.delay());
  const bases = [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000];
  assert.equal(RETRY_FIRST_MS, bases[0]);
  assert.equal(RETRY_CAP_MS, 30000);
  steps.forEach((ms, i) => assert.ok(ms >= bases[i] / 2 && ms <= bases[i], `step ${i}: ${ms} ms in [${bases[i] / 2}, ${bases[i]}]`));
  // Jitter: many draws of one step are spread over its upper half, not one value.
  const draws = new Set(Array.from({ length: 50 }, () => new Backoff(1000).delay()));
  assert.ok(draws.size > 40, `${draws.size} distinct delays`);
  // wake() ends a wait at once and starts again from the first delay.
  const slow = new Backoff(60000, 60000);
  const started = Date.now();
  const waiting = slow.wait();
  slow.wake();
  await waiting;
  assert.ok(Date.now() - started < 1000);
  assert.equal(slow.next, 60000);
  b.reset();
  assert.ok(b.delay() <= 1000);
});

// ── grants (crypto.md §4.8b): the signed bytes, and the app's reading of an offer (grant.js) ──────────────

/** `u32 BE length ‖ UTF-8`, written here from crypto.md §4.8 rather than taken from crypto.js. */
const lengthPrefixed = (text) => {
  const bytes = Buffer.from(text, "utf8");
  const n = Buffer.alloc(4);
  n.writeUInt32BE(bytes.length);
  return Buffer.concat([n, bytes]);
};

const grantFields = (scope) => ({
  agentId: "ag_vector",
  deviceId: "dv_vector",
  questionId: "qst_gate",
  questionDigest: "EKYzIyT6XughEDO8XaUht0Ws306w9nLh_jVjEwFdRKE",
  grantedAt: "2026-11-30T00:41:02.003Z",
  grant: { scope, expiresAt: "2026-11-30T01:41:02.003Z", policy: "UE9MSUNZ", signature: "ignored: not signed" },
});

test("signed grants: the bytes of crypto.md §4.8b field by field, signed and verified; every field is covered; malformed fields are refused", async () => {
  const exact = { tool: "Bash", command: "cargo test", match: "exact", folder: "/work/app" };
  const edit = { tool: "Edit", folder: "/work/Été app" };
  for (const scope of [exact, edit]) {
    const fields = grantFields(scope);
    const context = Buffer.from("pacerelle/v1/grant-signature", "ascii");
    assert.equal(context.length, 28);
    const expected = Buffer.concat([
      context,
      Buffer.from([1]),
      ...[fields.agentId, fields.deviceId, fields.questionId, fields.questionDigest, fields.grantedAt].map(lengthPrefixed),
      ...[fields.grant.expiresAt, fields.grant.policy, scope.tool, scope.command || "", scope.match || "", scope.folder].map(lengthPrefixed),
    ]);
    assert.equal(hex(c.signedGrantBytes(fields)), expected.toString("hex"));
  }
  // A scope without a command: `command` and `match` are two empty fields (00 00 00 00 twice) before the folder.
  assert.ok(hex(c.signedGrantBytes(grantFields(edit))).endsWith(`0000000000000000${lengthPrefixed(edit.folder).toString("hex")}`));

  const key = await ed25519FromSeed(new Uint8Array(32).fill(0x77));
  const publicRaw = await publicOf(key);
  const fields = grantFields(exact);
  const signature = await c.signGrant(key, fields);
  assert.ok(await c.verify(publicRaw, c.signedGrantBytes(fields), signature));
  const g = fields.grant;
  for (const changed of [
    { ...fields, agentId: "ag_other" },
    { ...fields, deviceId: "dv_other" },
    { ...fields, questionId: "qst_other" },
    { ...fields, questionDigest: "A" + fields.questionDigest.slice(1) },
    { ...fields, grantedAt: "2026-11-30T00:41:02.004Z" },
    { ...fields, grant: { ...g, expiresAt: "2026-11-30T01:41:02.004Z" } },
    { ...fields, grant: { ...g, policy: "T1RIRVI" } },
    { ...fields, grant: { ...g, scope: { ...exact, tool: "shell" } } },
    { ...fields, grant: { ...g, scope: { ...exact, command: "cargo" } } },
    { ...fields, grant: { ...g, scope: { ...exact, match: "prefix" } } },
    { ...fields, grant: { ...g, scope: { ...exact, folder: "/work" } } },
  ]) {
    assert.equal(await c.verify(publicRaw, c.signedGrantBytes(changed), signature), false, JSON.stringify(changed));
  }
  for (const bad of [
    { ...fields, grantedAt: "2026-11-30T00:41:02Z" },
    { ...fields, grant: { ...g, expiresAt: "2026-11-30T02:41:02.003+01:00" } },
    { ...fields, grant: { ...g, scope: { ...exact, match: undefined } } },
    { ...fields, grant: { ...g, scope: { ...exact, command: undefined } } },
    { ...fields, grant: { ...g, scope: { ...exact, match: "glob" } } },
    { ...fields, grant: { ...g, scope: { tool: "Bash" } } },
    { ...fields, grant: { ...g, policy: undefined } },
    { ...fields, grant: undefined },
  ]) {
    assert.throws(() => c.signedGrantBytes(bad), c.CryptoError, JSON.stringify(bad));
  }
});

test("grant.js: an offer is read as the core validates it, durations read as people say them, a choice outside the offer is refused", async () => {
  const g = await import("../web/app/grant.js");
  const scopes = [
    { tool: "Bash", command: "cargo test", match: "exact", folder: "/w", extra: 1 },
    { folder: "/w", match: "prefix", command: "cargo test", tool: "Bash" },
  ];
  const offer = { durations: [900, 3600], scopes, policy: "P" };
  const read = g.readOffer({ kind: "yes_no", grants: offer });
  // Scopes keep the core's members, in its order; nothing unknown is carried into a signed grant.
  assert.deepEqual(read, {
    offer: {
      durations: [900, 3600],
      scopes: [
        { tool: "Bash", command: "cargo test", match: "exact", folder: "/w" },
        { tool: "Bash", command: "cargo test", match: "prefix", folder: "/w" },
      ],
      policy: "P",
    },
  });
  assert.deepEqual(Object.keys(read.offer.scopes[1]), ["tool", "command", "match", "folder"]);
  assert.deepEqual(g.readOffer({ kind: "yes_no" }), { offer: null });
  assert.deepEqual(g.readOffer({ kind: "yes_no", grants: null }), { offer: null });
  const scope = scopes[0];
  for (const [payload, why] of [
    [{ kind: "choice", grants: offer }, /only a yes\/no question/],
    [{ kind: "yes_no", grants: [] }, /an offer is an object/],
    [{ kind: "yes_no", grants: { ...offer, durations: [] } }, /1 to 8 durations/],
    [{ kind: "yes_no", grants: { ...offer, durations: [1, 2, 3, 4, 5, 6, 7, 8, 9] } }, /1 to 8 durations/],
    [{ kind: "yes_no", grants: { ...offer, durations: [0] } }, /from 1 s to a day/],
    [{ kind: "yes_no", grants: { ...offer, durations: [86401] } }, /from 1 s to a day/],
    [{ kind: "yes_no", grants: { ...offer, durations: [90.5] } }, /from 1 s to a day/],
    [{ kind: "yes_no", grants: { ...offer, durations: ["900"] } }, /from 1 s to a day/],
    [{ kind: "yes_no", grants: { ...offer, scopes: [] } }, /1 to 8 scopes/],
    [{ kind: "yes_no", grants: { ...offer, scopes: [{ ...scope, folder: "" }] } }, /names a tool and a folder/],
    [{ kind: "yes_no", grants: { ...offer, scopes: [{ ...scope, match: undefined }] } }, /command and its match go together/],
    [{ kind: "yes_no", grants: { ...offer, scopes: [{ ...scope, match: "glob" }] } }, /command and its match go together/],
    [{ kind: "yes_no", grants: { ...offer, scopes: [{ ...scope, command: "cargo test; sh", match: "prefix" }] } }, /plain command/],
    [{ kind: "yes_no", grants: { ...offer, scopes: [{ ...scope, command: " ", match: "prefix" }] } }, /plain command/],
    [{ kind: "yes_no", grants: { ...offer, policy: "" } }, /policy's digest/],
  ]) {
    const { offer: none, problem } = g.readOffer(payload);
    assert.equal(none, null, JSON.stringify(payload));
    assert.match(problem, why);
    assert.match(problem, /^This question's grant offer is malformed \(.*\): it can be answered, not granted\.$/);
  }
  // An exact command may hold anything: it is compared whole.
  assert.ok(g.readOffer({ kind: "yes_no", grants: { ...offer, scopes: [{ ...scope, command: "a && b" }] } }).offer);

  assert.deepEqual([900, 3600, 5400, 45, 90, 86400, 3661].map(g.durationLabel),
    ["15 min", "1 h", "1 h 30 min", "45 s", "1 min 30 s", "24 h", "1 h 1 min 1 s"]);
  assert.deepEqual(g.scopeWords(read.offer.scopes[1]), { code: "cargo test …", how: "with any arguments", folder: "/w" });
  assert.deepEqual(g.scopeWords({ tool: "Edit", folder: "/w" }), { code: "Edit", how: "on files inside the folder", folder: "/w" });

  // The grant of a choice: the chosen scope as offered, until the chosen duration after the answer.
  const at = "2026-11-30T23:59:30.250Z";
  assert.deepEqual(g.grantFor(read.offer, { scope: 1, seconds: 900 }, at), {
    scope: read.offer.scopes[1],
    expiresAt: "2026-12-01T00:14:30.250Z",
    policy: "P",
  });
  for (const [choice, why] of [
    [{ scope: 2, seconds: 900 }, /offers 2 scope\(s\)/],
    [{ scope: -1, seconds: 900 }, /offers 2 scope\(s\)/],
    [{ seconds: 900 }, /offers 2 scope\(s\)/],
    [{ scope: 0, seconds: 3601 }, /last 1 h at most/],
    [{ scope: 0, seconds: 0 }, /last 1 h at most/],
    [{ scope: 0, seconds: 1.5 }, /last 1 h at most/],
  ]) {
    assert.throws(() => g.grantFor(read.offer, choice, at), (e) => e instanceof g.GrantError && why.test(e.message), JSON.stringify(choice));
  }
  assert.throws(() => g.grantFor(null, { scope: 0, seconds: 900 }, at), /offers no grant/);
  // What an answer shows of its grant: only a well-formed one.
  assert.equal(g.readGrant({ scope: { tool: "Bash", command: "x" }, expiresAt: at }), null);
  assert.equal(g.readGrant({ scope: read.offer.scopes[0], expiresAt: "soon" }), null);
  assert.deepEqual(g.readGrant({ scope: scopes[0], expiresAt: at, policy: "P", signature: "s" }),
    { scope: read.offer.scopes[0], expiresAt: at, policy: "P" });
});

test("details.js: the sections of a gate question's details, and a diff's added and removed lines", async () => {
  const { classify } = await import("../web/app/details.js");
  const kinds = (text) => classify(text).map((l) => `${l.kind} ${l.text}`);
  // Without a diff (the gate's details before it wrote one): nothing is coloured, `+` or `-` or not.
  assert.deepEqual(kinds('Tool: Bash\nWhy asked: the default\nDirectory: /w\n\nInput:\n{\n  "command": "rm -rf x"\n}\n-not a diff'), [
    "text Tool: Bash", "text Why asked: the default", "text Directory: /w", "text ", "heading Input:",
    "text {", 'text   "command": "rm -rf x"', "text }", "text -not a diff",
  ]);
  // The gate's diff of an Edit (docs/hooks.md): the heading with the file and the counts, context, removed and
  // added lines, until the next section. A removed `-- comment` is removed, not a file line.
  assert.deepEqual(kinds("Tool: Edit\nCommand:\nrm -rf x\n\nDiff: /r/lib.rs (+1 -2)\n fn main() {\n-    old();\n--- comment\n+    new();\n \n\nInput:\n-1\n+1"), [
    "text Tool: Edit", "heading Command:", "text rm -rf x", "text ", "heading Diff: /r/lib.rs (+1 -2)", "context  fn main() {",
    "del -    old();", "del --- comment", "add +    new();", "context  ", "text ", "heading Input:", "text -1", "text +1",
  ]);
  // A MultiEdit's edits, a patch's files, a cut; and a bare `Diff:` followed by its own header line.
  assert.deepEqual(kinds("Diff: /r/m.rs (+1 -2)\n@@ edit 1\n-a\n+b\n@@ edit 2\n-c\n… (600 more lines not shown)"), [
    "heading Diff: /r/m.rs (+1 -2)", "hunk @@ edit 1", "del -a", "add +b", "hunk @@ edit 2", "del -c", "context … (600 more lines not shown)",
  ]);
  assert.deepEqual(kinds("Diff: (+1 -1)\n*** Update File: src/main.rs\n@@\n-a\n+b"), [
    "heading Diff: (+1 -1)", "file *** Update File: src/main.rs", "hunk @@", "del -a", "add +b",
  ]);
  assert.deepEqual(kinds("Diff:\nsrc/lib.rs: 1 added\n+x"), ["heading Diff:", "file src/lib.rs: 1 added", "add +x"]);
  // A diff right after its heading, with the counts on the heading's line, and at the end of the details.
  assert.deepEqual(kinds("Diff: 1 added, 1 removed\n-a\n+b"), ["heading Diff: 1 added, 1 removed", "del -a", "add +b"]);
});

test("api.js: every relay error code has the kind the Rust client gives it, or a finer one the app needs", async () => {
  const { ApiError, isRevocation, kindOf } = await import("../web/app/api.js");
  const source = (path) => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), "utf8");
  // The codes (pacerelle_core::wire::code): NAME → "string".
  const wire = source("pacerelle-core/src/wire.rs");
  const codeModule = wire.slice(wire.indexOf("pub mod code {"));
  const codes = new Map([...codeModule.slice(0, codeModule.indexOf("\n}")).matchAll(/pub const (\w+): &str = "(\w+)";/g)]
    .map(([, name, value]) => [name, value]));
  assert.ok(codes.size >= 30, `${codes.size} codes`);
  // The client's classification (ErrorKind::of_code): each arm's codes and its kind, in snake case (an arm too long
  // for one line has its kind in a block).
  const rust = source("pacerelle-client/src/error.rs");
  const ofCode = rust.slice(rust.indexOf("pub fn of_code"));
  const arms = [...ofCode.slice(0, ofCode.indexOf("_ => ErrorKind::Internal")).matchAll(/((?:\|?\s*c::\w+\s*)+)=>\s*\{?\s*ErrorKind::(\w+)/g)];
  assert.ok(arms.length >= 15, `${arms.length} arms`);
  // Where the app keeps a code apart from the rest of its Rust kind, because it answers it in its own way.
  const finer = {
    no_route: "not_found",
    bad_cursor: "invalid_input",
    signing_key_exists: "id_conflict",
    forbidden: "unauthorized",
    pairing_expired: "pairing",
    pairing_claimed: "pairing",
    pairing_proof: "pairing",
  };
  const classified = new Set();
  for (const [, names, kind] of arms) {
    const rustKind = kind.replace(/[A-Z]/g, (ch, at) => (at ? "_" : "") + ch.toLowerCase());
    for (const name of names.match(/c::(\w+)/g).map((n) => n.slice(3))) {
      const code = codes.get(name);
      assert.ok(code, `${name} is a code`);
      const jsKind = kindOf(code);
      assert.ok(jsKind === rustKind || finer[jsKind] === rustKind, `${code}: ${jsKind}, the client says ${rustKind}`);
      classified.add(code);
    }
  }
  // Every code but "internal" is classified on both sides; an unknown code is internal.
  for (const code of codes.values()) {
    if (code === "internal") assert.equal(kindOf(code), "internal");
    else assert.ok(classified.has(code), `${code} has no kind in the client`);
  }
  assert.equal(kindOf("http_418"), "internal");
  assert.equal(kindOf("constructor"), "internal");
  // The app's own: the relay not reached. A gateway's 502–504 without a code is unavailable, as in the client.
  const err = (status, code) => new ApiError(status, code, "m");
  assert.equal(err(0, "network").kind, "network");
  assert.equal(err(502, "http_502").kind, "unavailable");
  assert.equal(err(500, "http_500").kind, "internal");
  // Retried: unreachable, 408, 429 and 5xx, but not a full quota.
  assert.deepEqual(
    [err(0, "network"), err(408, "request_timeout"), err(429, "rate_limited"), err(429, "quota_exceeded"), err(500, "internal"), err(404, "not_found")]
      .map((e) => e.transient),
    [true, true, true, false, true, false],
  );
  // A closed question says how; a revocation is a revoked device or a refused credential, not a forbidden route.
  assert.deepEqual(
    ["question_answered", "question_expired", "question_cancelled", "not_found"].map((code) => err(409, code).closedState),
    ["answered", "expired", "cancelled", null],
  );
  assert.deepEqual(
    [err(410, "device_revoked"), err(401, "unauthorized"), err(403, "forbidden"), new Error("x")].map(isRevocation),
    [true, true, false, false],
  );
});

test("the activity word follows the core's vectors (activity.json), and the app's own count is the fresher", async () => {
  const { activityOf, ACTIVITIES } = await import("../web/app/activity.js");
  assert.deepEqual(ACTIVITIES, ["asking", "working", "listening", "offline"]);
  const cases = vectors("activity");
  assert.ok(cases.length >= 10);
  for (const v of cases) {
    const status = { presence: v.presence, messages: { inProgress: v.inProgress }, openQuestions: v.openQuestions };
    assert.equal(activityOf(status), v.activity, v.name);
  }
  // [status, the app's own count of questions waiting (undefined: not read), word]
  const app = [
    [{}, undefined, "offline"],
    [null, undefined, "offline"],
    // An older relay states no openQuestions: the app's count decides, and without one there is none.
    [{ presence: "listening" }, 2, "asking"],
    [{ presence: "listening" }, undefined, "listening"],
    // The app's count is read as questions arrive and close; the status every few seconds: the count wins.
    [{ presence: "listening", openQuestions: 0 }, 1, "asking"],
    [{ presence: "listening", openQuestions: 1 }, 0, "listening"],
    [{ presence: "busy", openQuestions: 1 }, 0, "working"],
    [{ presence: "offline", openQuestions: 1 }, undefined, "asking"],
  ];
  for (const [status, waiting, word] of app) assert.equal(activityOf(status, waiting), word, JSON.stringify([status, waiting]));
});

test("the agents' tabs leave out the words every name starts with, never a whole name", async () => {
  const { tabLabels } = await import("../web/app/names.js");
  assert.deepEqual(tabLabels(["Ana’s laptop — Claude Code", "Ana’s build server"]), ["laptop — Claude Code", "build server"]);
  assert.deepEqual(tabLabels(["Ana’s laptop", "Ana’s server", "Ana’s CI"]), ["laptop", "server", "CI"]);
  // Names that share no first word, or one name alone, are whole.
  assert.deepEqual(tabLabels(["Laptop", "Build server"]), ["Laptop", "Build server"]);
  assert.deepEqual(tabLabels(["Ana’s laptop"]), ["Ana’s laptop"]);
  // A name made only of the shared words keeps its last word; the others keep theirs from the same point.
  assert.deepEqual(tabLabels(["Ana’s agent", "Ana’s agent two"]), ["agent", "agent two"]);
  assert.deepEqual(tabLabels(["CI", "CI"]), ["CI", "CI"]);
  assert.deepEqual(tabLabels(["Ana’s  laptop", "Ana’s server"]), ["laptop", "server"]);
});
