// Files reserved in the workspace (docs/reservations.md "On the page"): who holds which path
// patterns of which project, exclusively or shared, until when, and why. Read from the hub
// when the panel opens, and again when a reservation notice arrives in the open room (a
// grant, a release, an expiry: hub notices with `agentpost/reservation` in their metadata).

import * as api from "./api.js";

export const NOTICE_KEY = "agentpost/reservation";

/** "14:05" today, else "7 Dec 14:05": when a reservation lapses, in the reader's time. */
export function until(iso) {
  const at = new Date(iso);
  const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (at.toDateString() === new Date().toDateString()) return time;
  return `${at.toLocaleDateString([], { day: "numeric", month: "short" })} ${time}`;
}

export class Reservations {
  /** `toggle` opens `panel`, which lists into `list` and says how it went in `status`. */
  constructor({ toggle, panel, list, status }) {
    Object.assign(this, { toggle, panel, list, status });
    this.workspace = null;
    this.seq = 0; // a newer read wins over an older one still on its way
    toggle.addEventListener("click", () => this.show(panel.hidden));
  }

  /** The workspace whose reservations are shown, or null when no room is open. */
  open(workspace) {
    this.workspace = workspace;
    this.toggle.hidden = !workspace;
    this.show(false);
  }

  show(open) {
    this.panel.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    if (open) this.refresh();
  }

  /** An event arrived in the open room: read again if it says a reservation changed. */
  eventArrived(event) {
    const meta = event && event.metadata;
    if (!this.panel.hidden && meta && meta[NOTICE_KEY]) this.refresh();
  }

  async refresh() {
    const ws = this.workspace;
    if (!ws) return;
    const seq = ++this.seq;
    this.status.textContent = "Reading the reservations…";
    try {
      const path = `/v1/workspaces/${encodeURIComponent(ws)}/reservations`;
      const { body } = await api.call("GET", path);
      if (seq !== this.seq) return;
      this.draw(body.reservations || []);
    } catch (err) {
      if (seq !== this.seq) return;
      this.status.textContent = `The reservations could not be read: ${err.message}`;
    }
  }

  draw(found) {
    const items = found.map((r) => {
      const item = document.createElement("li");
      item.className = "reservation";
      item.dataset.reservation = r.id;
      const who = document.createElement("strong");
      who.textContent = r.holder;
      const what = document.createElement("span");
      what.textContent = ` holds ${r.exclusive ? "exclusively" : "shared"} `;
      const paths = document.createElement("code");
      paths.textContent = r.paths.join(" ");
      const where = document.createElement("span");
      where.className = "hint";
      const reason = r.reason ? ` · ${r.reason}` : "";
      where.textContent = ` in ${r.project}, until ${until(r.expires_at)}${reason}`;
      item.append(who, what, paths, where);
      return item;
    });
    this.list.replaceChildren(...items);
    this.status.textContent = found.length
      ? `${found.length} live reservation${found.length === 1 ? "" : "s"}`
      : "No files are reserved in this workspace.";
  }
}
