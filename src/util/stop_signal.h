// Graceful stop on SIGTERM / SIGINT for training loops (issue 22, item 6). A scheduler's SIGTERM or
// a user's Ctrl-C should end a run at the next step boundary with a checkpoint, not lose the work
// since the last one. install_stop_signal_handlers() makes the first SIGTERM or SIGINT only record
// itself (one line on stderr says so); the engine reads the record at each accumulation boundary,
// agrees on it across ranks, and engine.stop_requested() turns true on every rank at the same step.
// A second SIGTERM or SIGINT ends the process at once, as if no handler were installed.
#pragma once

namespace ds {

// Opt-in (ds-train calls it; a library must not take a program's signals unasked). Idempotent.
void install_stop_signal_handlers();

// Restores the dispositions install_stop_signal_handlers() replaced and forgets any signal received.
void uninstall_stop_signal_handlers();

// The first stop signal received since install (SIGTERM or SIGINT), or 0. Async-signal-safe.
int stop_signal_received();

// "SIGTERM", "SIGINT", else "a stop request" (engine.request_stop()).
const char* stop_signal_name(int sig);

}  // namespace ds
