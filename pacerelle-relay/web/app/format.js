// Times and sizes as a person reads them, on every screen of the page.

/** A time as a person reads it: the hour today, the day and hour otherwise. */
export function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const sameDay = d.toDateString() === new Date().toDateString();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return sameDay ? time : `${d.toLocaleDateString([], { day: "numeric", month: "short" })} ${time}`;
}

/** "42 s left", "3 min 05 s left", "2 h 10 min left", "3 days left": how long `ms` lasts. */
export function timeLeft(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  if (s < 60) return `${s} s left`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(s % 60).padStart(2, "0")} s left`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${String(m % 60).padStart(2, "0")} min left`;
  return `${Math.floor(h / 24)} days left`;
}

/** A date and time in full ("3 March 2026 at 14:05" in English), for facts such as when a device was paired. */
export const dateTime = (iso) => {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? "" : d.toLocaleString([], { dateStyle: "long", timeStyle: "short" });
};

/** A size in bytes, in KiB as people read it: "64 KiB", "195.3 KiB". */
export function kib(bytes) {
  const k = bytes / 1024;
  return `${Number.isInteger(k) ? k : k.toFixed(1)} KiB`;
}
