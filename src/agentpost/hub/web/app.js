// The page: sign in with a member token, the rooms you take part in with unread counts,
// a room's timeline (pages of events, kept live by its stream) and the composer.

import * as api from "./api.js";
import { Composer } from "./composer.js";
import { Inbox } from "./inbox.js";
import { Presence } from "./presence.js";
import { Search } from "./search.js";
import { RoomStream } from "./stream.js";
import { Timeline } from "./timeline.js";

const PAGE = 50;
const ROOM_KEY = "agentpost.room";
const $ = (id) => document.getElementById(id);

const state = {
  me: null,
  rooms: new Map(), // id → room
  buttons: new Map(), // id → room button
  counts: new Map(),
  roomId: null,
  stream: null,
  inbox: null,
  loadingOlder: false,
};

const timeline = new Timeline($("timeline"), (text) => roomStatus(text));
const presence = new Presence($("people"), timeline);
const composer = new Composer({
  form: $("composer"),
  box: $("message"),
  file: $("file"),
  button: $("send"),
  status: $("composer-status"),
  onPosted: (event) => {
    if (event && event.room === state.roomId && timeline.add(event)) {
      scrollToEnd(true);
      presence.eventsArrived();
    }
  },
});

function roomStatus(text) {
  $("room-status").textContent = text;
}

function showSignIn(reason) {
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("whoami").textContent = "";
  $("signin").hidden = false;
  $("signin-reason").textContent = reason || "";
  $("token").focus();
}

function signOut(reason) {
  api.clearToken();
  if (state.inbox) state.inbox.stop();
  if (state.stream) state.stream.close();
  presence.close();
  Object.assign(state, { me: null, roomId: null, stream: null, inbox: null });
  state.rooms.clear();
  state.buttons.clear();
  state.counts.clear();
  timeline.clear();
  $("rooms").replaceChildren();
  search.clear();
  $("room-title").textContent = "Pick a room";
  roomStatus("");
  $("composer").hidden = true;
  sessionStorage.clear();
  showSignIn(reason);
}

async function signIn(event) {
  event.preventDefault();
  const value = $("token").value.trim();
  if (!value) {
    $("signin-reason").textContent = "Paste a member token first.";
    return;
  }
  api.setToken(value);
  $("token").value = "";
  await enter();
}

function refusedSignIn(err) {
  if (err instanceof api.HubError && err.status === 403) {
    signOut(`This token's member was removed: ${err.message}.`);
  } else if (err instanceof api.HubError) {
    showSignIn(`The hub refused: ${err.message}.`);
  } else {
    showSignIn("The hub could not be reached. Is it running?");
  }
}

async function enter() {
  let me;
  try {
    me = (await api.call("GET", "/v1/me")).body;
  } catch (err) {
    if (!(err instanceof api.HubError && err.status === 401)) refusedSignIn(err);
    return;
  }
  state.me = me;
  $("signin").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  $("whoami").textContent = `${me.member.name} (${me.member.kind}) in ${me.workspace.name}`;
  api
    .call("GET", "/v1/capabilities")
    .then((res) => {
      composer.maxUpload = res.body.max_upload_bytes;
    })
    .catch(() => {});
  state.inbox = new Inbox(me.inbox_cursor, (counts) => {
    state.counts = counts;
    for (const roomId of counts.keys()) if (!state.rooms.has(roomId)) loadRooms();
    drawCounts();
  });
  await loadRooms();
  const wanted = sessionStorage.getItem(ROOM_KEY);
  if (wanted && state.rooms.has(wanted)) await openRoom(wanted);
  else if (state.buttons.size) state.buttons.values().next().value.focus();
}

async function loadRooms() {
  if (!state.me) return;
  let rooms;
  try {
    const path = `/v1/workspaces/${encodeURIComponent(state.me.workspace.name)}/rooms`;
    rooms = (await api.call("GET", path)).body.rooms;
  } catch (err) {
    if (!(err instanceof api.HubError && err.status === 401)) roomStatus(`Rooms: ${err.message}`);
    return;
  }
  rooms.sort((a, b) => a.name.localeCompare(b.name));
  const list = $("rooms");
  list.replaceChildren();
  state.rooms.clear();
  state.buttons.clear();
  for (const room of rooms) {
    state.rooms.set(room.id, room);
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "room-button";
    button.textContent = room.name;
    const count = document.createElement("span");
    count.className = "unread";
    count.id = "unread-" + room.id;
    count.hidden = true;
    button.setAttribute("aria-describedby", count.id);
    if (room.id === state.roomId) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openRoom(room.id));
    item.append(button, count);
    if (room.archived) {
      const tag = document.createElement("span");
      tag.className = "tag";
      tag.textContent = "archived";
      item.append(tag);
    }
    list.append(item);
    state.buttons.set(room.id, button);
  }
  $("rooms-empty").hidden = rooms.length > 0;
  drawCounts();
}

function drawCounts() {
  for (const roomId of state.rooms.keys()) {
    const node = $("unread-" + roomId);
    if (!node) continue;
    const n = state.counts.get(roomId) || 0;
    node.hidden = n === 0;
    node.textContent = n ? `${n} unread` : "";
  }
}

function nearEnd() {
  const box = $("timeline-box");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollToEnd(force) {
  const box = $("timeline-box");
  if (force || nearEnd()) box.scrollTop = box.scrollHeight;
}

async function fetchEvents(roomId, after, limit) {
  const path = `/v1/rooms/${encodeURIComponent(roomId)}/events?after=${after}&limit=${limit}`;
  return (await api.call("GET", path)).body.events;
}

async function openRoom(roomId) {
  if (state.stream) state.stream.close();
  state.stream = null;
  presence.close();
  state.roomId = roomId;
  sessionStorage.setItem(ROOM_KEY, roomId);
  for (const [id, button] of state.buttons) {
    if (id === roomId) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
  timeline.clear();
  $("older").hidden = true;
  const known = state.rooms.get(roomId);
  $("room-title").textContent = known ? known.name : roomId;
  $("composer").hidden = false;
  composer.open(roomId);
  roomStatus("Loading…");
  let room;
  let events;
  try {
    room = (await api.call("GET", `/v1/rooms/${encodeURIComponent(roomId)}`)).body.room;
    events = await fetchEvents(roomId, Math.max(0, room.last_seq - PAGE), PAGE);
  } catch (err) {
    if (state.roomId === roomId) roomStatus(`This room cannot be read: ${err.message}`);
    return;
  }
  if (state.roomId !== roomId) return;
  $("room-title").textContent = room.archived ? `${room.name} (archived)` : room.name;
  timeline.maxDepth = room.max_delegation_depth;
  for (const event of events) timeline.add(event);
  $("older").hidden = !(timeline.oldest > 1);
  scrollToEnd(true);
  if (state.inbox) state.inbox.show(roomId);
  presence.open(room, state.me.workspace.name);
  const after = Math.max(room.last_seq, timeline.newest || 0);
  state.stream = new RoomStream(roomId, after, onLive, onStreamState);
}

// The latest read asked per event: an older answer never draws over a newer one.
const refreshing = new Map();

/** Draw `id` again as the hub serves it now: an edit, reaction or redaction named it. */
async function refreshEvent(roomId, id) {
  const ask = (refreshing.get(id) || 0) + 1;
  refreshing.set(id, ask);
  try {
    const event = (await api.call("GET", `/v1/events/${encodeURIComponent(id)}`)).body.event;
    if (state.roomId === roomId && refreshing.get(id) === ask) timeline.replace(event);
  } catch (err) {
    if (state.roomId === roomId) roomStatus(`Could not update a message: ${err.message}`);
  } finally {
    if (refreshing.get(id) === ask) refreshing.delete(id);
  }
}

function onLive(event) {
  if (event.room !== state.roomId) return;
  const follow = nearEnd();
  if (!timeline.add(event)) return;
  if (event.relates_to && timeline.has(event.relates_to)) {
    refreshEvent(event.room, event.relates_to);
  }
  if (follow) scrollToEnd(true);
  presence.eventsArrived();
}

function onStreamState(kind, err) {
  const words = {
    connecting: "Connecting…",
    live: "Live",
    reconnecting: "Connection lost; reconnecting…",
  };
  if (kind === "stopped") {
    roomStatus(err ? `Not live: ${err.message}` : "Not live");
  } else {
    roomStatus(words[kind]);
  }
  $("timeline-box").setAttribute("aria-busy", kind === "live" ? "false" : "true");
}

async function loadOlder() {
  const roomId = state.roomId;
  const oldest = timeline.oldest;
  if (state.loadingOlder || !roomId || !(oldest > 1)) return false;
  state.loadingOlder = true;
  const box = $("timeline-box");
  try {
    const after = Math.max(0, oldest - 1 - PAGE);
    const events = await fetchEvents(roomId, after, oldest - 1 - after);
    if (state.roomId !== roomId) return false;
    const before = box.scrollHeight;
    for (const event of events) timeline.add(event);
    box.scrollTop += box.scrollHeight - before;
    $("older").hidden = !(timeline.oldest > 1);
    return events.length > 0;
  } catch (err) {
    roomStatus(`Older messages: ${err.message}`);
    return false;
  } finally {
    state.loadingOlder = false;
  }
}

/** Open `roomId` and bring `eventId` into view, paging back to it if it is older. */
async function openAt(roomId, eventId) {
  if (state.roomId !== roomId || !timeline.focusEvent(eventId)) {
    if (state.roomId !== roomId) await openRoom(roomId);
    while (!timeline.focusEvent(eventId) && state.roomId === roomId) {
      if (!(await loadOlder())) {
        roomStatus("That message is no longer in this room's timeline.");
        return;
      }
    }
  }
}

const search = new Search({
  form: $("search"),
  box: $("search-box"),
  results: $("search-results"),
  status: $("search-status"),
  more: $("search-more"),
  onOpen: openAt,
  roomName: (id) => (state.rooms.get(id) || { name: id }).name,
});

timeline.onAnswerClick = async (id) => {
  const roomId = state.roomId;
  while (!timeline.focusEvent(id) && state.roomId === roomId) {
    if (!(await loadOlder())) {
      roomStatus("The message it answers is not in this room's timeline.");
      return;
    }
  }
};

api.onUnauthorized((err) => signOut(`Signed out: ${err.message}.`));
$("signin-form").addEventListener("submit", signIn);
$("sign-out").addEventListener("click", () => signOut("You signed out."));
$("older").addEventListener("click", loadOlder);
$("timeline-box").addEventListener("scroll", () => {
  if ($("timeline-box").scrollTop < 40) loadOlder();
});

if (api.token()) enter();
else showSignIn("");
