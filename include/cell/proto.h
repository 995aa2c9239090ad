/* The relay between celld and cell-init: length-prefixed frames on a Unix stream socket.
 *
 * Every frame is an 8-byte header followed by `len` payload bytes:
 *
 *     u32 len (big endian, payload bytes only, <= CELL_FRAME_MAX)
 *     u16 type (big endian, enum cell_frame_type)
 *     u16 reserved (must be 0)
 *
 * One connection carries one conversation: celld connects to the sandbox's init socket,
 * sends one request frame (PING, EXEC, FILE_*), and init answers on the same connection.
 * Control payloads are JSON objects; STDOUT/STDERR/DATA payloads are raw bytes.
 *
 *   PING  → PONG {"pid":1,"version":"..."}
 *   EXEC {"command":"<base64 of the shell command>"} or {"argv":["<base64>",...]},
 *        optional "cwd", "env":["K=V",...], "timeout_ms", "uid", "gid"
 *        → STARTED {"pid":N} → STDOUT/STDERR* → EXIT {"exit_code","signal","timed_out",
 *          "duration_ms"} or ERROR {"errno","message"} when it could not start.
 *        celld may send SIGNAL {"signal":N} at any time while it runs; closing the
 *        connection does NOT kill the command (background commands outlive their caller).
 *   FILE_STAT {"path"} → STAT {"path","type","size","mode","uid","gid","owner","group",
 *        "mtime","ctime","target"?,"xattrs"?} or ERROR (target: a symlink's text, also in
 *        ENTRIES; xattrs: a regular file's or directory's metadata, {key: value} of its
 *        "user.e2b.<key>" extended attributes, bounded and validated as CELL_META_* says,
 *        the others left out; absent when none or unreadable, also in ENTRIES)
 *   FILE_READ {"path","offset","limit"} → STAT → DATA* → END, or ERROR
 *   FILE_WRITE {"path","mode","uid"?|"owner"?,"gid"?|"group"?,"xattrs"?} then DATA* then END
 *        from celld → OK {"size":N} or ERROR (xattrs {key: value}: the file's metadata, set
 *        as "user.e2b.<key>" on the new file before it replaces the old, whose own go with
 *        it; EINVAL at once for a key or value CELL_META_* refuses)
 *   FILE_MKDIR {"path","mode"?,"uid"?|"owner"?,"gid"?|"group"?} (mkdir -p; owner/group
 *        are names looked up in the sandbox's /etc/passwd, /etc/group, or digits)
 *        → OK {"created":bool} or ERROR
 *   FILE_REMOVE {"path","recursive"?} → OK {"removed":true} or ERROR
 *   FILE_LIST {"path","depth"?,"max_entries"?,"pattern"?} → ENTRIES* → END, or ERROR
 *        (ENTRIES {"entries":[<STAT objects>]}, each at most 64 KiB)
 *   FILE_MOVE {"src","dest"} → OK {"moved":true} or ERROR
 *   FILE_CHMOD {"path","mode"?,"uid"?|"owner"?,"gid"?|"group"?} → OK {"changed":true} or ERROR
 *   FILE_REPLACE {"path","old","new"} → OK {"replaced":N} or ERROR
 *   FILE_WATCH {"path","recursive"?} → OK {"dirs":N} once the directory (and, recursive,
 *        those below it) is watched, then EVENTS {"events":[{"name","op"}]} (name relative
 *        to path; op create, write, remove, rename or chmod) as inotify reports them, until
 *        celld closes; END when the directory itself is gone; ERROR EOVERFLOW when events
 *        were lost (the kernel's queue, or celld not reading)
 *   FILE_TAR {"path"} → STAT (of what path leads to, symlinks followed confined) → DATA*
 *        (a POSIX tar archive of it, ustar with pax headers) → END, or ERROR: before STAT
 *        when it cannot be archived, after DATA when the archive is cut short (a bound, a
 *        read error: the end-of-archive blocks are then never sent)
 *   SESSION_OPEN {"id","cwd"?,"env":["K=V",...]} → OK {"pid","shell":"bash"|"sh"} once the
 *        shell is ready, or ERROR (EEXIST, EMFILE at the cap, ENOENT a cwd it cannot enter)
 *   SESSION_RUN {"id","command":"<base64>","cwd"?,"timeout_ms"?} → the conversation of EXEC
 *        (STARTED {"pid": the shell's} → STDOUT/STDERR* → EXIT, SIGNAL from celld), or ERROR:
 *        ENOENT no such session, EBUSY a run is going on, EPIPE its shell has exited
 *   SESSION_CLOSE {"id"} → OK {"closed":true,"pid"} or ERROR ENOENT
 *   PTY_CREATE {"id","cwd"?,"command"?:"<base64>","env":["K=V",...],"uid"?,"gid"?}
 *        → OK {"id"} or ERROR (EEXIST, EMFILE at the cap, EINVAL a bad field). Nothing
 *        starts yet: the process (command, or the login shell) starts on the first attach.
 *        Optional too: "argv":["<base64>",...] (run directly, not through a shell; a
 *        name without '/' is looked up in the env's PATH by /bin/sh), "user":"<name>"
 *        (its uid, primary gid and home from the sandbox's /etc/passwd, USER and LOGNAME
 *        set, the home the default cwd, a relative cwd (or "~", "~/...") below it;
 *        ERROR ENOENT when no line names it, unless
 *        "user_optional":true, which runs as root then), "timeout_ms":N (the process is
 *        killed N ms after it starts, attached or not), "once":true (the session is
 *        forgotten when its process ends: it never starts a second time), "stdin":false
 *        (pipe mode: the process reads /dev/null, input is refused with EPIPE).
 *   PTY_ATTACH {"id","pty":bool,"since"?:N,"takeover"?:bool,"cols"?,"rows"?}
 *        → ERROR ENOENT (no such session) or EBUSY (another connection is attached and
 *        takeover is false), or OK {"mode":"pty"|"pipe","pid","output_offset"}, starting the
 *        process when none runs (in the mode asked; a running one keeps its own), then
 *        REPLAY (u64 big-endian offset of its first byte, then the kept bytes from since on;
 *        only when since < output_offset), then live STDOUT (and STDERR in pipe mode), then
 *        EXIT {"exit_code","signal"} when the process ends; the conversation ends there.
 *        A takeover ends the previous holder's conversation with ERROR ECONNABORTED
 *        ("taken over"). While attached, celld sends STDIN (raw bytes), STDIN_CLOSE (pipe
 *        mode: close its stdin; pty mode: the terminal's EOF character; init answers
 *        STDIN_TAKEN as for EXEC below, and celld keeps the same window), RESIZE
 *        {"cols","rows"}, SIGNAL {"signal":N} (to its process group). Closing the
 *        connection detaches: the process runs on and its output goes to the scrollback.
 *   PTY_STATUS {"id"} → OK {"running","output_offset","mode"?,"pid"?,"exit_code"?} or
 *        ERROR ENOENT
 *   PTY_CLOSE {"id"} → OK {"closed":true} (its process group killed) or ERROR ENOENT
 *   PTY_ATTACH with "share":true joins the connections attached to a running process
 *        instead of EBUSY (up to 8 beside the first): each gets its output and its EXIT
 *        (STDIN_TAKEN goes to the first only); a takeover ends them all.
 *   PTY_ATTACH, PTY_STATUS, PTY_CLOSE and PTY_CONTROL name a session by "id" or by "pid"
 *        (the sandbox pid of its running process).
 *   PTY_LIST {} → OK {"sessions":[{"id","pid","mode"}]} of the sessions whose process runs
 *   PTY_CONTROL {"id"|"pid","stdin"?:"<base64>","stdin_close"?:true,"cols"?,"rows"?,
 *        "signal"?:N} acts on a running process without attaching (while another
 *        connection may hold it), in that order: input queued (the attached connection's
 *        STDIN_TAKEN counts it too), its stdin closed (pty mode: the EOF character), the
 *        window resized, a signal (SIGKILL kills its whole session, others go to the
 *        foreground process group). → OK {} or ERROR: ENOENT no such session, ESRCH its
 *        process is not running, EPIPE its stdin is closed, ENOBUFS its input is full.
 *   EXEC with "stdin":true: the command's stdin is a pipe fed by STDIN frames on its EXEC
 *        connection, closed by STDIN_CLOSE or by the connection's end (without it, stdin
 *        is /dev/null). Init answers STDIN_TAKEN {"bytes":N} as the command takes input
 *        (N bytes written to the pipe, or dropped once nobody reads it), so that celld
 *        never has more than CELL_STDIN_WINDOW bytes sent and not taken: the window is
 *        how a writer faster than the command waits instead of overflowing init.
 *   OCI_CREATE {"argv":["<base64>",...],"env":["K=V",...],"cwd","uid","gid","gids"?:[...],
 *        "umask"?,"terminal"?,"rows"?,"cols"?,"caps"?:{"bounding","effective","permitted",
 *        "inheritable","ambient"} (bit masks),"rlimits"?:[{"type","soft","hard"}],
 *        "oom_score_adj"?,"seccomp"?:"<base64 of a BPF program>"} (cell-init --oci only, once)
 *        → OK {"pid"} once the container's process exists and waits for OCI_START; with
 *        "terminal", the OK frame carries the terminal's master (SCM_RIGHTS) for the
 *        engine's console socket. Or ERROR.
 *   OCI_START {} → OK {} once the process has exec'd, or ERROR naming the step that failed
 *        (its program not found, ...). cell-init exits with the process's status when it
 *        ends (128+n for signal n), and passes it the signals the host sends to PID 1.
 *   An init older than these frames drops a connection that sends one (an unknown type).
 *
 * Everything init sends is hostile input to celld: the parser bounds sizes, refuses
 * unknown types and non-zero reserved bits, and the caller drops the connection on any
 * violation. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cell/error.h"
#include "cell/meta.h"

/* The relay's listening socket is this fd in cell-init: the runtime puts it there before
 * the exec, init accepts celld's connections on it. */
#define CELL_INIT_LISTEN_FD 3

#define CELL_FRAME_HEADER 8
#define CELL_FRAME_MAX	  (1u << 20)  /* largest payload either side accepts */
#define CELL_FRAME_CHUNK  (64u << 10) /* payload size used for streamed bytes */
#define CELL_STDIN_WINDOW (1u << 20)  /* a command's input sent and not yet taken, at most */

enum cell_frame_type {
	CELL_FRAME_PING = 1,
	CELL_FRAME_PONG = 2,
	CELL_FRAME_EXEC = 3,
	CELL_FRAME_STARTED = 4,
	CELL_FRAME_STDOUT = 5,
	CELL_FRAME_STDERR = 6,
	CELL_FRAME_EXIT = 7,
	CELL_FRAME_SIGNAL = 8,
	CELL_FRAME_ERROR = 9,
	CELL_FRAME_FILE_STAT = 10,
	CELL_FRAME_STAT = 11,
	CELL_FRAME_FILE_READ = 12,
	CELL_FRAME_DATA = 13,
	CELL_FRAME_END = 14,
	CELL_FRAME_FILE_WRITE = 15,
	CELL_FRAME_OK = 16,
	CELL_FRAME_FILE_MKDIR = 17,
	CELL_FRAME_FILE_REMOVE = 18,
	CELL_FRAME_FILE_LIST = 19,
	CELL_FRAME_ENTRIES = 20,
	CELL_FRAME_FILE_MOVE = 21,
	CELL_FRAME_FILE_CHMOD = 22,
	CELL_FRAME_FILE_REPLACE = 23,
	CELL_FRAME_FILE_TAR = 24,
	CELL_FRAME_SESSION_OPEN = 25,
	CELL_FRAME_SESSION_RUN = 26,
	CELL_FRAME_SESSION_CLOSE = 27,
	CELL_FRAME_PTY_CREATE = 28,
	CELL_FRAME_PTY_ATTACH = 29,
	CELL_FRAME_PTY_STATUS = 30,
	CELL_FRAME_PTY_CLOSE = 31,
	CELL_FRAME_STDIN = 32,
	CELL_FRAME_STDIN_CLOSE = 33,
	CELL_FRAME_RESIZE = 34,
	CELL_FRAME_REPLAY = 35,
	CELL_FRAME_STDIN_TAKEN = 36,
	CELL_FRAME_PTY_LIST = 37,
	CELL_FRAME_PTY_CONTROL = 38,
	/* 39: free. */
	CELL_FRAME_FILE_WATCH = 40,
	CELL_FRAME_EVENTS = 41,
	CELL_FRAME_OCI_CREATE = 42,
	CELL_FRAME_OCI_START = 43,
	CELL_FRAME_TYPE_MAX = 43,
};

struct cell_frame {
	uint16_t type;
	uint32_t len;
	uint8_t *payload; /* malloc'd, NUL-terminated (len + 1 bytes), NULL when len == 0 */
};

const char *cell_frame_type_name(uint16_t type);

/* Encode a header into out[8]. */
void cell_frame_header_encode(uint8_t out[CELL_FRAME_HEADER], uint16_t type, uint32_t len);

/* Decode and validate a header. Returns 0, or -EPROTO (bad type or reserved bits) /
 * -EMSGSIZE (len > max). */
int cell_frame_header_decode(const uint8_t in[CELL_FRAME_HEADER], uint32_t max, uint16_t *type,
			     uint32_t *len);

/* Blocking I/O on a stream socket (EINTR retried, MSG_NOSIGNAL). */
int cell_frame_send(int fd, uint16_t type, const void *payload, uint32_t len,
		    struct cell_error *err);
/* Send a JSON text payload (strlen). */
int cell_frame_send_str(int fd, uint16_t type, const char *json, struct cell_error *err);
/* Receive one frame; -ECONNRESET on a clean EOF before a header, -EPROTO/-EMSGSIZE on a
 * bad header. free(frame->payload) afterwards. */
int cell_frame_recv(int fd, struct cell_frame *frame, uint32_t max, struct cell_error *err);
void cell_frame_free(struct cell_frame *frame);
