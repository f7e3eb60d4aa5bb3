// Reconnection delays of the web app (its long-poll and its outbox): exponential from 1 s, capped at 30 s, with
// jitter; and the plain pause of its polling loops. Runs in the browser and in node (web-tests/crypto.test.mjs checks it).

/** The first delay, and the cap, in milliseconds. */
export const RETRY_FIRST_MS = 1000;
export const RETRY_CAP_MS = 30000;

/**
 * A reconnection delay: exponential, capped, with jitter (half fixed, half random), so that phones cut off
 * together by a relay restart do not all come back in the same second. `wake()` ends the current wait early
 * (the network came back, or the page was shown again).
 */
export class Backoff {
  constructor(first = RETRY_FIRST_MS, cap = RETRY_CAP_MS) {
    this.first = first;
    this.cap = cap;
    this.next = first;
    this.wakeUp = null;
  }

  reset() {
    this.next = this.first;
  }

  /** The delay to wait now (and doubles the next one). */
  delay() {
    const base = this.next;
    this.next = Math.min(this.next * 2, this.cap);
    return base / 2 + Math.random() * (base / 2);
  }

  wait() {
    const ms = this.delay();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        if (self.wakeUp === done) self.wakeUp = null;
        resolve();
      }
      this.wakeUp = done;
    });
  }

  wake() {
    this.reset();
    if (this.wakeUp) this.wakeUp();
  }
}

/** A plain pause of `ms` milliseconds (the status and presence loops' pace). */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
