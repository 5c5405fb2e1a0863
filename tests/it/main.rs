//! Cross-process tests: the plugin's sealing, the relay over real HTTP on loopback with a real
//! database, and the browser's executor (native build), wired as in production.

mod live_loop;
mod logs;
mod tab;
