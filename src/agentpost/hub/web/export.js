// Export of the open room (docs/web.md "Export"): the page asks the hub for the room's
// Markdown or JSONL export with its token in the Authorization header (never in a URL),
// then saves what came back through a Blob object URL, as a file download does.

import * as api from "./api.js";

const KINDS = { md: "Markdown", jsonl: "JSONL" };

/** The object of an export's last line ({end} when whole, {error} when the hub stopped it). */
async function endOf(data, format) {
  const tail = (await data.slice(-4096).text()).trimEnd();
  let last = tail.slice(tail.lastIndexOf("\n") + 1);
  if (format === "md") {
    const [open, close] = ["<!-- agentpost-export ", " -->"];
    if (!last.startsWith(open) || !last.endsWith(close)) return null;
    last = last.slice(open.length, -close.length);
  }
  try {
    return JSON.parse(last);
  } catch (_) {
    return null;
  }
}

export class RoomExport {
  /** `toggle` opens `panel`; each `buttons[format]` downloads that format. */
  constructor({ toggle, panel, buttons, status }) {
    Object.assign(this, { toggle, panel, buttons, status });
    this.room = null;
    this.busy = false;
    toggle.addEventListener("click", () => this.show(panel.hidden));
    for (const [format, button] of Object.entries(buttons)) {
      button.addEventListener("click", () => this.download(format));
    }
  }

  /** The room the buttons export: {id, name}, or null when none is open. */
  open(room) {
    this.room = room;
    this.toggle.hidden = !room;
    this.show(false);
  }

  show(open) {
    this.panel.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    if (open) this.status.textContent = "";
  }

  async download(format) {
    const room = this.room;
    if (!room || this.busy) return;
    this.busy = true;
    this.status.textContent = `Exporting ${room.name} as ${KINDS[format]}…`;
    try {
      const path = `/v1/rooms/${encodeURIComponent(room.id)}/export?format=${format}`;
      const data = await api.blob(path);
      const ended = await endOf(data, format);
      if (!ended || !ended.end) {
        const why = ended && ended.error ? ended.error.message : "it was cut short";
        throw new Error(`${why}; nothing was saved`);
      }
      const url = URL.createObjectURL(data);
      const link = document.createElement("a");
      link.href = url;
      link.download = `${room.name}.${format}`;
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      if (this.room === room) this.status.textContent = `Saved ${room.name}.${format}.`;
    } catch (err) {
      if (this.room === room) this.status.textContent = `Not exported: ${err.message}`;
    } finally {
      this.busy = false;
    }
  }
}
