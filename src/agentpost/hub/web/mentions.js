// @-completion in the composer: typing "@" and the start of a name lists the room's
// members whose names start so (a listbox under the box, ARIA combobox-style); arrows move,
// Enter or Tab picks, Escape closes. Picking writes "@name " in place of what was typed.

const MAX_SHOWN = 8;
const TYPED = /(^|\s)@([A-Za-z0-9_.-]*)$/;

export class Mentions {
  /** box: the textarea; list: the <ul role=listbox>; names(): who may be mentioned. */
  constructor(box, list, names) {
    Object.assign(this, { box, list, names });
    this.shown = [];
    this.active = 0;
    this.start = -1;
    box.addEventListener("input", () => this.update());
    box.addEventListener("blur", () => this.close());
    box.addEventListener("click", () => this.update());
  }

  get open() {
    return !this.list.hidden;
  }

  update() {
    const caret = this.box.selectionStart;
    if (caret !== this.box.selectionEnd) return this.close();
    const typed = TYPED.exec(this.box.value.slice(0, caret));
    if (!typed) return this.close();
    const prefix = typed[2].toLowerCase();
    const found = this.names()
      .filter((name) => name.toLowerCase().startsWith(prefix))
      .sort()
      .slice(0, MAX_SHOWN);
    if (!found.length) return this.close();
    this.start = caret - typed[2].length - 1;
    this.shown = found;
    this.active = 0;
    this.draw();
  }

  draw() {
    const items = this.shown.map((name, i) => {
      const item = document.createElement("li");
      item.id = `mention-${i}`;
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", String(i === this.active));
      item.textContent = "@" + name;
      item.addEventListener("mousedown", (ev) => {
        ev.preventDefault(); // keep the focus in the box
        this.pick(i);
      });
      return item;
    });
    this.list.replaceChildren(...items);
    this.list.hidden = false;
    this.box.setAttribute("aria-expanded", "true");
    this.box.setAttribute("aria-activedescendant", `mention-${this.active}`);
  }

  close() {
    this.list.hidden = true;
    this.list.replaceChildren();
    this.shown = [];
    this.box.setAttribute("aria-expanded", "false");
    this.box.removeAttribute("aria-activedescendant");
  }

  pick(i) {
    const name = this.shown[i];
    if (name === undefined) return;
    const caret = this.box.selectionStart;
    const text = this.box.value;
    const inserted = `@${name} `;
    this.box.value = text.slice(0, this.start) + inserted + text.slice(caret);
    const at = this.start + inserted.length;
    this.box.setSelectionRange(at, at);
    this.close();
    this.box.dispatchEvent(new Event("input", { bubbles: true }));
  }

  /** The composer's keydown: true when the list used the key. */
  handleKey(ev) {
    if (!this.open) return false;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      const step = ev.key === "ArrowDown" ? 1 : -1;
      this.active = (this.active + step + this.shown.length) % this.shown.length;
      this.draw();
    } else if (ev.key === "Enter" || ev.key === "Tab") {
      this.pick(this.active);
    } else if (ev.key === "Escape") {
      this.close();
    } else {
      return false;
    }
    ev.preventDefault();
    return true;
  }
}
