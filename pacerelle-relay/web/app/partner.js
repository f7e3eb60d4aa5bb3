// Partner mode: the agent as its product shows it to a user — the product's accent colour and icon, from a
// pairing (or offer) that carries a branding.

import * as c from "./crypto.js";
import { $ } from "./dom.js";

/** The WCAG relative luminance of `#rrggbb`. */
function luminance(hex) {
  const [r, g, b] = [1, 3, 5].map((i) => {
    const v = parseInt(hex.slice(i, i + 2), 16) / 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** White or black, whichever contrasts more with `hex`: never below 4.58:1, whatever the colour. */
function inkOn(hex) {
  const l = luminance(hex);
  return 1.05 / (l + 0.05) >= (l + 0.05) / 0.05 ? "#ffffff" : "#000000";
}

const DEFAULT_ICON = "/app/icon.svg";

const DEFAULT_THEME = document.querySelector('meta[name="theme-color"]').content;

/**
 * Shows the agent as a Partner-mode pairing (or offer) describes it, `{branding?}`: its accent colour becomes the
 * app's brand colour (buttons, the question's frame, a line under the header), with white or black text on it,
 * whichever reads better; its icon, an inline data URL (nothing is fetched), replaces Pacerelle's in the header.
 * Without a branding — an owner's pairing — the app keeps its own look.
 */
export function applyLook(who) {
  const branding = who && who.branding && c.brandingProblem(who.branding) === null ? who.branding : null;
  const accent = branding && branding.accentColor;
  const root = document.documentElement.style;
  if (accent) {
    root.setProperty("--accent", accent);
    root.setProperty("--brand", accent);
    root.setProperty("--brand-fg", inkOn(accent));
  } else {
    for (const name of ["--accent", "--brand", "--brand-fg"]) root.removeProperty(name);
  }
  document.body.classList.toggle("branded", Boolean(accent));
  document.querySelector('meta[name="theme-color"]').content = accent || DEFAULT_THEME;
  const icon = (branding && branding.icon) || DEFAULT_ICON;
  if ($("brand-icon").getAttribute("src") !== icon) $("brand-icon").src = icon;
}
