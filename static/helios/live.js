// One live connection for every page: reconnects with backoff, answers the server's pings, and
// reconnects when the server has been silent for more than two ping intervals (a connection a
// proxy or a sleeping laptop dropped without telling either end). Close codes 4401 (logged out)
// and 4404 (no such stream) end the retries: a reconnect cannot fix them.
window.heliosLive = function (path, handlers) {
  "use strict";
  const FINAL = { 4401: "logged out: reload the page to log in again", 4404: "no such stream" };
  let retry = 500;
  let silence = null;
  let interval = 20; // seconds between the server's pings (it says so in each ping)

  function watch(ws, seconds) {
    clearTimeout(silence);
    silence = setTimeout(() => ws.close(), 2.5 * seconds * 1000);
  }

  function connect() {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + path();
    const ws = new WebSocket(url);
    // Watched from the start, not from the first ping: a socket the server accepted and then never
    // served (stuck joining its group while Redis restarts) is closed and opened again.
    ws.onopen = () => { retry = 500; watch(ws, interval); if (handlers.open) handlers.open(); };
    ws.onmessage = (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch (e) { console.error(e); return; }
      if (msg.type === "ping") {
        ws.send(JSON.stringify({ type: "pong" }));
        interval = msg.interval;
        watch(ws, interval);
        return;
      }
      try { handlers.message(msg); } catch (e) { console.error(e); }
    };
    ws.onclose = (event) => {
      clearTimeout(silence);
      const final = FINAL[event.code];
      const again = !final && !(handlers.finished && handlers.finished());
      if (handlers.close) handlers.close(final || (again ? "reconnecting…" : "finished"));
      if (again) { setTimeout(connect, retry); retry = Math.min(retry * 2, 10000); }
    };
  }
  connect();
};
