# shellcheck shell=sh disable=SC2242 # exit @NAME@: the assembler puts the number in
## The POSIX shell that runs in front of the user's command on every node:
## `/bin/sh -c PRELUDE launcher CMD...` does what Batch leaves to the job, then runs CMD.
##
## - Rendezvous: Batch tells the workers the main node's address but not the main node itself.
##   Every node gets LAUNCHER_MAIN_ADDR (and PyTorch's MASTER_*, torchrun's PET_*).
## - EFA userspace (when the job has EFA on): without libfabric's EFA provider and the
##   aws-ofi-nccl plugin, NCCL quietly falls back to TCP sockets on one interface. The check
##   looks for both, puts the plugin's directory on the loader path and names the plugin to NCCL
##   when the image left that out, and prints one line: `launcher: EFA ready ...` or
##   `launcher: EFA WARNING ...`. With `--efa require` (the default for multi-node jobs on an
##   EFA pool) a missing piece fails the node with exit code 78 before the command starts, and a
##   missing device with BAD_HOST_EXIT (79).
## - Node health: the node's GPUs, as nvidia-smi sees them (count, uncorrected ECC errors,
##   pending retirements and remaps); a bad host ends the node with 79 before the command.
## - The fabric guard: after NCCL starts, TCP sockets, another provider than efa or fewer NICs
##   than the type has end the command within seconds (NCCL_WATCH).
## - Capacity Blocks: the command gets a signal to checkpoint before EC2 ends the block's
##   instances, in an attempt that runs in the block's own compute environment and starts before
##   that moment (CHECKPOINT_TIMER).
## - Restarts that resume (LAUNCHER_RESTARTS=on, the default with --torchrun): every node gets
##   LAUNCHER_CHECKPOINT_DIR on EFS, the same for every attempt of the job (and for
##   `launcher resubmit`); the node watch (python3, beside the command; launcher/node/watch/)
##   ends the main node with exit code 75 when a worker is lost (its container killed, its host
##   gone: no word within 30 s), which the job's retry rules turn into another attempt, and with
##   the worker's own code when a worker fails by itself, which they do not. Batch itself
##   retries only what happens to the main node. The watch hears only the job's own nodes:
##   each holds the job's token (LAUNCHER_WATCH_TOKEN, new with every submit) and says it first.
## - NCCL's transport: NCCL's INFO output goes to files under /tmp/launcher-nccl (set by the
##   job definition unless the user sets NCCL_DEBUG_FILE); a watcher forwards every NCCL WARN
##   line, once, and one `launcher: NCCL network ...` line per node, so the transport NCCL chose
##   is in the job log without thousands of INFO lines around the user's own output.
## - Its own files (the node watch's, the watcher's counts, the signal's mark) in a directory
##   made for the run and removed at its end (PRIVATE), never at a fixed name in /tmp.
## - Behind any entrypoint: a job's command is the image's Cmd, and Batch cannot override the
##   image's ENTRYPOINT, which runs first. Most pass their arguments on with `exec "$@"` (NGC's
##   nvidia_entrypoint.sh, tini); AWS's own PyTorch training images for EC2 end
##   dockerd_entrypoint.sh with `eval "$@"`, which joins the arguments and parses them again
##   as shell: the first line of this script would run in a shell of its own and the rest in
##   the entrypoint's, with the main node's address lost on every worker. REPARSE_GUARD makes
##   the command correct either way (see there).
##
## Written for dash, bash and busybox ash (no arrays, no `local`), tested in Docker behind each
## kind of entrypoint (tests/node/).
##
## How this file becomes the command (launcher.node.assemble, for launcher.node.prelude): the
## lines that start with ## are for whoever reads this file and are left out, and so are the
## ShellCheck directives that give a reason after a second #; each @NAME@ becomes its value
## from launcher.node.prelude (exit codes, the contract's title, library directories, and the
## node watch's two programs from launcher/node/watch/). What remains is the script every job
## definition carries, byte for byte as before it was a file (tests/node/test_assembled.py
## pins it). The `## === NAME ===` lines name the sections. One file, not one a section: they
## hand each other variables and functions (_tmp, _node, _report, _guard, _child ...), which
## ShellCheck follows only within one file.
## === REPARSE_GUARD ===
## The first lines, for an entrypoint that runs its arguments through `eval "$@"` (or `eval
## "$*"`): the joined command is parsed again, so only "/bin/sh -c false" runs in a shell of its
## own (a failure: no entrypoint can make the job succeed without running it), and the rest of
## the first line and the block run in the entrypoint's shell, whose $0 is not ours and whose
## own arguments are still the job's command, unparsed: that is run again, as given. Run as
## given (exec "$@", tini, no entrypoint), $0 is ours and the block is skipped. The script ends
## in a comment, which is where such an entrypoint's parse puts the command's arguments.
false || [ "$0" = @ARGV0@ ] || {
  if [ "${1:-}" = /bin/sh ] && [ "${2:-}" = -c ] && [ "${4:-}" = @ARGV0@ ]; then
    echo "launcher: the image's entrypoint ($0) parsed the command again (eval); running it as given" >&2
    _script=$3; shift 4; exec /bin/sh -c "$_script" @ARGV0@ "$@"
  fi
  echo "launcher: ERROR: the image's entrypoint ($0) changed the command's arguments; the job needs an image whose ENTRYPOINT passes them on unchanged, as exec does (see @CONTRACT@)" >&2
  exit @EFA_REQUIRED_EXIT@
}
## === SECRETS ===
## Local runs only: the job's secrets arrive as a file of quoted shell assignments, mounted
## read-only ($LAUNCHER_SECRETS_FILE, launcher.local.secret_values), not as the container's own
## environment, which `docker inspect` shows to anyone who may use the engine. The command gets
## them as environment, as on AWS, where the ECS agent sets them and there is no file.
if [ -n "${LAUNCHER_SECRETS_FILE:-}" ]; then
  # shellcheck disable=SC1090 # a file named at run time (the local backend mounts it)
  if [ -r "$LAUNCHER_SECRETS_FILE" ]; then . "$LAUNCHER_SECRETS_FILE"; else
    echo "launcher: ERROR: cannot read the job's secrets ($LAUNCHER_SECRETS_FILE)" >&2
    exit @EFA_REQUIRED_EXIT@
  fi
  unset LAUNCHER_SECRETS_FILE
fi
## === START_GATE ===
## Local runs only: every node waits for the file $LAUNCHER_START_GATE names, which the local
## backend makes once all of the job's nodes are up (they share the main node's network, which
## a worker can join only while the main node runs), or 60 s, so that no node's command starts
## before the others exist. On AWS the variable is not set.
if [ -n "${LAUNCHER_START_GATE:-}" ]; then
  _t=0
  while [ ! -e "$LAUNCHER_START_GATE" ] && [ "$_t" -lt 600 ]; do
    sleep 0.1 2>/dev/null || sleep 1; _t=$((_t + 1))
  done
  unset LAUNCHER_START_GATE
  # The nodes share the main node's name (its network), and torchrun's c10d rendezvous tells
  # nodes apart by name and process id (torch.distributed.elastic.rendezvous.dynamic_rendezvous
  # _NodeDesc); each node counts its ids from 1 through the same steps, so the same torchrun
  # id would make two nodes one. A worker steps its ids on, 64 a node (a background child
  # always forks; a subshell of builtins may not), and runs its command as a child (RUN):
  # exec'd, the command would keep this shell's id, the same on every node.
  _t=$(( ${AWS_BATCH_JOB_NODE_INDEX:-0} * 64 )); _stepped=""
  if [ "$_t" -gt 0 ]; then _stepped=1; fi
  while [ "$_t" -gt 0 ]; do : & wait "$!"; _t=$((_t - 1)); done
fi
## === PRIVATE ===
## What the prelude keeps while the command runs (the node watch's files, the NCCL watcher's
## counts and verdict, the checkpoint timer's mark) goes in a directory of its own, made for this
## run when the first of them needs it (`_private`: mktemp -d, mode 0700, under $TMPDIR or
## /tmp) and removed when the prelude ends. A fixed name in /tmp would be read by the next run on
## the same machine (a mark of a signal sent to another run turned its failure into a retry) and
## can be taken first by anyone who shares /tmp; a test that runs the prelude on such a machine
## gives it a TMPDIR of its own. In a job's container /tmp is the container's, as before.
_tmp=""; _ndir="${LAUNCHER_NCCL_DIR:-@NCCL_LOG_DIR@}"
_private() {
  [ -z "$_tmp" ] || return 0
  _tmp="$(mktemp -d "${TMPDIR:-/tmp}/launcher.XXXXXX" 2>/dev/null)" && return 0
  _tmp="${TMPDIR:-/tmp}/launcher.$$"; mkdir -m 700 "$_tmp" 2>/dev/null && return 0
  _tmp=""; echo "launcher: WARNING: cannot make a directory under ${TMPDIR:-/tmp}, so $1 is off" >&2
  return 1
}
trap '[ -z "$_tmp" ] || rm -rf "$_tmp"' EXIT
## === RENDEZVOUS ===
main="${AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS:-${LAUNCHER_MAIN_ADDR:-}}"
if [ -z "$main" ]; then main="$(hostname -i 2>/dev/null | cut -d' ' -f1)"; fi
export LAUNCHER_MAIN_ADDR="${main:-127.0.0.1}"
export LAUNCHER_NODE_RANK="${AWS_BATCH_JOB_NODE_INDEX:-0}"
export LAUNCHER_REPLICA_ID="$((LAUNCHER_NODE_RANK - ${LAUNCHER_GROUP_FIRST_NODE:-0}))"
## The job's id, the same on every node (a node's AWS_BATCH_JOB_ID is JOB#INDEX). A TorchX
## app's TORCHX_JOB_ID is its handle, SCHEDULER://SESSION/JOB, which the definition cannot know:
## there it ends in the text ${LAUNCHER_JOB_ID} (launcher.torchx.appdef), put in here.
export LAUNCHER_JOB_ID="${AWS_BATCH_JOB_ID:-}"; LAUNCHER_JOB_ID="${LAUNCHER_JOB_ID%%#*}"
# shellcheck disable=SC2016 # the text ${LAUNCHER_JOB_ID}, not its value
_jref='${LAUNCHER_JOB_ID}'
case "${TORCHX_JOB_ID:-}" in
  *"$_jref") TORCHX_JOB_ID="${TORCHX_JOB_ID%"$_jref"}$LAUNCHER_JOB_ID" ;;  # in the environment
esac
if [ -n "${LAUNCHER_CHECKPOINT_DIR:-}" ] && [ -n "${AWS_BATCH_JOB_ARRAY_INDEX:-}" ]; then
  # A resubmitted array names its first run's directory; each child resumes its own, which
  # its first run named after its job id, PARENT:INDEX.
  LAUNCHER_CHECKPOINT_DIR="${LAUNCHER_CHECKPOINT_DIR%%#*}:$AWS_BATCH_JOB_ARRAY_INDEX"
fi
export LAUNCHER_CHECKPOINT_DIR="${LAUNCHER_CHECKPOINT_DIR:-${LAUNCHER_EFS:-/tmp}/checkpoints/${AWS_BATCH_JOB_ID:-local}}"
export LAUNCHER_CHECKPOINT_DIR="${LAUNCHER_CHECKPOINT_DIR%%#*}"
mkdir -p "$LAUNCHER_CHECKPOINT_DIR" 2>/dev/null
export MASTER_ADDR="${MASTER_ADDR:-$LAUNCHER_MAIN_ADDR}" MASTER_PORT="${MASTER_PORT:-$LAUNCHER_MAIN_PORT}"
export PET_NNODES="${PET_NNODES:-$LAUNCHER_NNODES}" PET_NODE_RANK="${PET_NODE_RANK:-$LAUNCHER_NODE_RANK}"
export PET_MASTER_ADDR="${PET_MASTER_ADDR:-$LAUNCHER_MAIN_ADDR}" PET_MASTER_PORT="${PET_MASTER_PORT:-$LAUNCHER_MAIN_PORT}"
## === MONITOR ===
## The node watch (launcher/node/watch/ says what it is and why it is Python): set up here,
## started beside the command in RUN; a worker that ends before its command reports its code
## through it (_report).
_monitor=""; _wtoken="${LAUNCHER_WATCH_TOKEN:-}"; unset LAUNCHER_WATCH_TOKEN
if [ "${LAUNCHER_RESTARTS:-}" = on ] && [ "${LAUNCHER_NNODES:-1}" -gt 1 ]; then
  if ! command -v python3 >/dev/null 2>&1; then
    echo "launcher: restarts WARNING: no python3 in the image, so a lost node is not noticed and the job is not tried again" >&2
  elif [ -z "$_wtoken" ]; then
    echo "launcher: restarts WARNING: no LAUNCHER_WATCH_TOKEN (the launcher sets it with every submit), so the nodes cannot vouch for each other: a lost node is not noticed and the job is not tried again" >&2
  elif _private "the node watch"; then
    _monitor="$_tmp/monitor"; mkdir "$_monitor"
    _mport="$((LAUNCHER_MAIN_PORT + 1))"; _mstart="${LAUNCHER_START_SECONDS:-@START_SECONDS@}"
  fi
fi
# A worker that ends before its command (a bad host, a misbuilt image) tells the main node's
# watch its code at once, as its watch would have at the command's end: the main node then
# ends with it, instead of waiting for the roll call.
_report() {
  if [ -n "$_monitor" ] && [ "$LAUNCHER_NODE_RANK" != 0 ]; then
    echo "$1" > "$_monitor/exit"
    LAUNCHER_WATCH_TOKEN="$_wtoken" python3 -c '@MONITOR_WORKER@' "$LAUNCHER_MAIN_ADDR" "$_mport" "$LAUNCHER_NODE_RANK" "$_monitor" "$_mstart"
  fi
}
## === GPU_CHECK ===
## Node health, before the command: the GPUs this node's container was given, as nvidia-smi
## (which the NVIDIA container runtime mounts into every GPU container) sees them. A GPU that
## fell off the bus, an uncorrected ECC error since the driver loaded, a page retirement or row
## remap waiting for a reset: the host is bad, and the node ends with BAD_HOST_EXIT before the
## command starts, so the job is tried again elsewhere (launcher.job.jobdef's retry rules; the
## stack's node replacer takes the instance out of the pool).
_host="$(hostname 2>/dev/null)"; _node="node $LAUNCHER_NODE_RANK"
_where="${LAUNCHER_INSTANCE_TYPE:-}${_host:+${LAUNCHER_INSTANCE_TYPE:+, }host $_host}"
if [ -n "$_where" ]; then _node="$_node ($_where)"; fi
_bad=""
# What a node found wrong, in one line: its host (tried again elsewhere), or its image or the
# job's settings (not tried again). Said before the command (the checks) or after it (the
# fabric guard's verdict, in RUN).
_say_bad_host() {
  echo "launcher: BAD HOST: $_node: $1: ending with exit code @BAD_HOST_EXIT@ so that the job is tried again on another instance" >&2
}
_say_efa_error() {
  echo "launcher: EFA ERROR on $_node: $1: failing the job (--efa require); see @CONTRACT@" >&2
}
_bad_host() { _say_bad_host "$1"; _report @BAD_HOST_EXIT@; exit @BAD_HOST_EXIT@; }
if [ "${LAUNCHER_GPUS_PER_NODE:-0}" -gt 0 ] && [ "${LAUNCHER_HEALTH:-on}" != off ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "launcher: GPU check skipped on $_node: no nvidia-smi in the container (the NVIDIA runtime mounts it when NVIDIA_DRIVER_CAPABILITIES includes utility)" >&2
  elif ! _gpus="$(nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1)"; then
    _bad="; nvidia-smi failed: $(echo "$_gpus" | head -n 1)"
  else
    _seen=$(echo "$_gpus" | grep -c .)
    _model="$(echo "$_gpus" | head -n 1 | cut -d, -f2- | sed 's/^ *//')"
    if [ "$_seen" -lt "$LAUNCHER_GPUS_PER_NODE" ]; then _bad="; $_seen of $LAUNCHER_GPUS_PER_NODE GPUs visible"; fi
    _ecc="no uncorrected ECC errors"
    if _h="$(nvidia-smi --query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending --format=csv,noheader 2>/dev/null)"; then
      _bad="$_bad$(echo "$_h" | awk -F', *' '$2 ~ /^[0-9]+$/ && $2 > 0 { printf "; GPU %s: %s uncorrected ECC errors", $1, $2 }
        $3 == "Yes" { printf "; GPU %s: a page retirement is pending (needs a reboot)", $1 }')"
    else _ecc="ECC not reported by this driver"; fi
    if _h="$(nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure --format=csv,noheader 2>/dev/null)"; then
      _bad="$_bad$(echo "$_h" | awk -F', *' '$2 == "Yes" || $2 == "1" { printf "; GPU %s: a row remap is pending (needs a reset)", $1 }
        $3 == "Yes" || $3 == "1" { printf "; GPU %s: row remapping failed", $1 }')"
      _ecc="$_ecc, no pending or failed row remaps"
    fi
    if [ -z "$_bad" ]; then echo "launcher: GPUs healthy on $_node: $_seen/$LAUNCHER_GPUS_PER_NODE x $_model, $_ecc"; fi
  fi
  if [ -n "$_bad" ]; then _bad_host "${_bad#; }"; fi
fi
## === EFA_CHECK ===
_guard=""
if [ -n "${LAUNCHER_EFA:-}" ]; then
  _find() { for _d in $1; do for _n in $2; do
    if [ -e "$_d/$_n" ]; then echo "$_d/$_n"; return 0; fi; done; done; return 1; }
  _onpath() { case ":${LD_LIBRARY_PATH:-}:@SYSTEM_LIB_PATH@:" in *":$1:"*) return 0;; esac; return 1; }
  _path="$(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' ')"
  _missing=""; _notes=""
  _fabric="$(_find "$_path @LIBFABRIC_DIRS@ @SYSTEM_LIB_DIRS@" "libfabric.so.1 libfabric.so")"
  if [ -z "$_fabric" ]; then _missing="$_missing; no libfabric (libfabric.so.1)"
  elif ! _onpath "${_fabric%/*}"; then
    export LD_LIBRARY_PATH="${_fabric%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    _notes="$_notes, ${_fabric%/*} put on LD_LIBRARY_PATH"; fi
  _plugin="$(_find "$_path @PLUGIN_DIRS@ @SYSTEM_LIB_DIRS@" "@PLUGIN_NAMES@")"
  if [ -z "$_plugin" ]; then _missing="$_missing; no aws-ofi-nccl plugin (libnccl-net-ofi.so or libnccl-net.so)"
  else
    if ! _onpath "${_plugin%/*}"; then
      export LD_LIBRARY_PATH="${_plugin%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      _notes="$_notes, ${_plugin%/*} put on LD_LIBRARY_PATH"; fi
    case "${_plugin##*/}" in
      libnccl-net-ofi.so) [ -n "${NCCL_NET_PLUGIN:-}" ] || { export NCCL_NET_PLUGIN=ofi; _notes="$_notes, NCCL_NET_PLUGIN=ofi"; };;
      libnccl-net-aws-ofi.so) [ -n "${NCCL_NET_PLUGIN:-}" ] || { export NCCL_NET_PLUGIN=aws-ofi; _notes="$_notes, NCCL_NET_PLUGIN=aws-ofi"; };;
    esac; fi
  # shellcheck disable=SC2010 # a count of device names (uverbsN), no odd file names
  _devices=$(ls /dev/infiniband/ 2>/dev/null | grep -c '^uverbs')
  _want="${LAUNCHER_EFA_DEVICES:-0}"
  _short=""
  if [ "$_devices" -lt "$_want" ]; then _short="$_devices of $_want EFA devices visible"; fi
  _provider="not checked (no EFA device here)"
  if [ "$_devices" -gt 0 ] && [ -n "$_fabric" ]; then
    _fi="$(command -v fi_info || echo /opt/amazon/efa/bin/fi_info)"
    if [ ! -x "$_fi" ]; then _provider="present, not verified (no fi_info)"
    elif "$_fi" -p efa -t FI_EP_RDM >/dev/null 2>&1; then _provider="usable (fi_info -p efa)"
    else _missing="$_missing; libfabric has no usable efa provider (fi_info -p efa failed)"; fi; fi
  if [ "${LAUNCHER_REHEARSAL:-}" = local ] && [ "$_want" = 0 ]; then
    # A rehearsal has no EFA: TCP is expected, whatever --efa says; what the image lacks
    # would matter on AWS. Every node has the same image: the main node says it, once.
    if [ "$LAUNCHER_NODE_RANK" != 0 ]; then :
    elif [ -z "$_missing" ]; then
      echo "launcher: EFA: none on this machine (a local run), so NCCL uses TCP sockets here, as expected; the image has libfabric and aws-ofi-nccl for AWS"
    elif [ "$LAUNCHER_EFA" = require ]; then
      # What AWS would do with this image: stop the job (78) before the command starts.
      echo "launcher: EFA: none on this machine (a local run), so NCCL uses TCP sockets here, as expected; on AWS this job would stop here (--efa require), as the image lacks:${_missing#;} (see @CONTRACT@)"
    else
      echo "launcher: EFA: none on this machine (a local run), so NCCL uses TCP sockets here, as expected; on AWS this image would fall back to TCP too:${_missing#;} (see @CONTRACT@)"
    fi
  elif [ "$LAUNCHER_EFA" = require ] && [ -n "$_missing" ]; then
    # The image: it would fail the same way on every host, so the job is not tried again.
    _say_efa_error "${_missing#; }${_short:+; $_short}"
    _report @EFA_REQUIRED_EXIT@; exit @EFA_REQUIRED_EXIT@
  elif [ "$LAUNCHER_EFA" = require ] && [ -n "$_short" ]; then
    _bad_host "$_short (the instance type has $_want)"
  elif [ -z "$_missing$_short" ]; then
    echo "launcher: EFA ready: $_devices/$_want devices, libfabric $_fabric (efa provider $_provider), aws-ofi-nccl $_plugin$_notes"
    # After NCCL starts, its transport and NIC count are checked too (NCCL_WATCH), from the
    # INIT lines of NCCL's debug files; a job that changed those settings is told it is not.
    if [ "$LAUNCHER_EFA" = require ] && [ "$_want" -gt 0 ]; then
      # shellcheck disable=SC2018,SC2019 # NCCL's words are ASCII; busybox tr may lack classes
      _sub="$(echo ",${NCCL_DEBUG_SUBSYS:-INIT}," | tr 'a-z' 'A-Z')"
      # shellcheck disable=SC2018,SC2019 # NCCL's words are ASCII; busybox tr may lack classes
      case "$(echo "${NCCL_DEBUG:-}" | tr 'a-z' 'A-Z'):${NCCL_DEBUG_FILE:-}" in
        INFO:"$_ndir"/*|TRACE:"$_ndir"/*)
          case "$_sub" in *,INIT,*|*,ALL,*) _guard="$_want";; esac;;
      esac
      if [ -z "$_guard" ]; then
        echo "launcher: fabric guard: NCCL's network is not checked after it starts on $_node: the job set NCCL_DEBUG=${NCCL_DEBUG:-}, NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-} or NCCL_DEBUG_FILE=${NCCL_DEBUG_FILE:-} (the guard reads NCCL's INFO lines of INIT from $_ndir)" >&2
      fi
    fi
  else
    echo "launcher: EFA WARNING:${_missing#;}${_short:+; $_short}: NCCL will fall back to TCP sockets, not EFA; see @CONTRACT@" >&2
  fi
fi
## === NCCL_WATCH ===
## Forward NCCL's WARN lines and one transport line per node from the per-process debug files.
## The fabric guard (`_guard`, set by EFA_CHECK for `--efa require` on a node with EFA
## devices): once NCCL names its network, TCP sockets, another libfabric provider than efa, or
## fewer NICs than the type has end the command within seconds (the scan runs every second)
## instead of training at a fraction of the speed for days. Sockets or another provider are the
## image's or the job's settings (EFA_REQUIRED_EXIT: not tried again); fewer NICs, with every
## device present, is the host (BAD_HOST_EXIT). aws-ofi-nccl's line is "Selected Provider is %s
## (found %d nics)" before 1.14 and "Selected provider is %s, fabric is %s (found %d nics)" since
## (aws/aws-ofi-nccl, src/nccl_ofi_net.cpp); NCCL's own is "Using network %s" (src/init.cc).
_watch=""; _nccl=""
case "${NCCL_DEBUG_FILE:-}" in "$_ndir"/*)
  if _private "the NCCL watcher"; then _nccl=1; _seen="$_tmp/nccl"; mkdir -p "$_ndir" "$_seen"; fi
  _verdict() {
    [ -e "$_seen/verdict" ] && return 0
    echo "$1 $2" > "$_seen/verdict"
    kill -TERM "$_child" 2>/dev/null
    ( sleep 5; kill -KILL "$_child" 2>/dev/null ) &
  }
  _nccl_scan() {
    for _f in "$_ndir"/*.log; do
      [ -f "$_f" ] || continue
      _s="$_seen/${_f##*/}"; _old=$(cat "$_s" 2>/dev/null || echo 0)
      _new=$(wc -l < "$_f"); [ "$_new" -gt "$_old" ] || continue
      tail -n "+$((_old + 1))" "$_f" | head -n "$((_new - _old))" > "$_s.chunk"
      echo "$_new" > "$_s"
      grep ' NCCL WARN ' "$_s.chunk"
      if [ ! -e "$_seen/network" ]; then
        _net="$(grep -o 'Using network .*' "$_s.chunk" | head -n 1)"
        if [ -n "$_net" ]; then
          : > "$_seen/network"
          case "$_net" in *Socket*) echo "launcher: NCCL ${_net#Using } (TCP sockets: EFA is NOT in use)";;
            *) echo "launcher: NCCL ${_net#Using }";; esac
        fi
      fi
      if [ -n "$_guard" ]; then
        _sel="$(grep -o 'Selected [Pp]rovider is [^ ,]*.*(found [0-9]* nics)' "$_s.chunk" | head -n 1)"
        if [ -n "$_sel" ]; then
          _prov="$(echo "$_sel" | sed 's/^Selected [Pp]rovider is \([^ ,]*\).*/\1/')"
          _nics="$(echo "$_sel" | sed 's/.*(found \([0-9]*\) nics)$/\1/')"
          if [ "$_prov" != efa ]; then _verdict @EFA_REQUIRED_EXIT@ "aws-ofi-nccl chose libfabric's $_prov provider, not efa"
          elif [ "$_nics" -lt "$_guard" ]; then _verdict @BAD_HOST_EXIT@ "aws-ofi-nccl found $_nics of the $_guard EFA NICs the instance type has"
          elif [ ! -e "$_seen/nics" ]; then
            : > "$_seen/nics"; echo "launcher: fabric verified on $_node: NCCL on EFA, $_nics of $_guard NICs"
          fi
        fi
        if grep -q 'Using network Socket' "$_s.chunk"; then
          _verdict @EFA_REQUIRED_EXIT@ "NCCL chose TCP sockets (Using network Socket), not EFA"
        fi
      fi
    done
  }
  # One scanner, from the command's start to past its end. RUN tells it to finish with a file,
  # not a signal, so it is never cut off mid-scan (a scan killed with its pipeline or grep still
  # running on a chunk that the next scan rewrites forwarded lines twice), and waits while it
  # scans once more, without the guard, and ends: each line is forwarded once.
  _nccl_watch() {
    if sleep 0.2 2>/dev/null; then _nap=0.2 _naps=5; else _nap=1 _naps=1; fi
    while :; do
      _nccl_scan
      _n=0
      while [ ! -e "$_seen/stop" ] && [ "$_n" -lt "$_naps" ]; do sleep "$_nap"; _n=$((_n + 1)); done
      [ ! -e "$_seen/stop" ] || break
    done
    _guard=""; _nccl_scan
  };;
esac
## === CHECKPOINT_TIMER ===
## In a Capacity Block (launcher.job.capacity): at LAUNCHER_CHECKPOINT_AT (the block's end, less the
## 30 minutes from which EC2 ends its instances, less --checkpoint-lead) the command is sent
## LAUNCHER_CHECKPOINT_SIGNAL so that it can checkpoint; the job then resumes, on the next block
## or the fallback pool, from LAUNCHER_CHECKPOINT_DIR. torchrun forwards no SIGUSR1 and dies of
## it, so under torchrun (the command's first word) its children, the workers, get the signal
## (found by their parent's pid in /proc/*/stat, whose fields after the ") " that ends the
## process's name are its state and then its parent's pid). RUN starts `_checkpoint` beside
## the command and ends it with the command.
##
## The timer arms only for an attempt that EC2 will end with the block, and only while the
## moment is ahead. The values ride in the SubmitJob's overrides, which Batch gives every
## attempt of the job, so a retry sees them too: on the fallback pool, or in the block after the
## moment, a timer that fired at once would end each retry with 75 in turn until the job failed.
## Batch names the compute environment it placed the attempt in ("AWS_BATCH_CE_NAME: This
## variable is set to the name of the compute environment where your job is placed", Batch user
## guide, job_env_vars.html); the launcher gives the block's (LAUNCHER_CAPACITY_BLOCK_CE, from
## the stack's Pools output; a stack older than that names none, and then only the moment
## counts) and the fallback's (LAUNCHER_FALLBACK_CE). An attempt that does not arm says why in
## one line, and its command runs to its own end with its own exit code.
##
## A command that dies of the signal (it did not catch it), or ends otherwise than 0 after it,
## ends the node with NODE_LOST_EXIT: EC2 was about to end it anyway, and a retry ("Host EC2"
## would have been one) resumes the run on the next block or the fallback pool, where an exit
## code of 128+N would fail the job for good. Only a signal this run's timer sent counts: its
## mark is in this run's own directory (PRIVATE).
_timer=""
if [ -n "${LAUNCHER_CHECKPOINT_AT:-}" ]; then
  _hhmm() { printf '%02d:%02d' $(($1 % 86400 / 3600)) $(($1 % 3600 / 60)); }
  _end="${LAUNCHER_WINDOW_END:-0}"; _sig="${LAUNCHER_CHECKPOINT_SIGNAL:-USR1}"
  _when="Capacity Block ${LAUNCHER_CAPACITY_BLOCK:-} ends at $(_hhmm "$_end") UTC; EC2 ends its instances from $(_hhmm $((_end - 1800))) UTC"
  _ce="${AWS_BATCH_CE_NAME:-}"; _off=""
  if [ -n "${LAUNCHER_CAPACITY_BLOCK_CE:-}" ] && [ "$_ce" != "$LAUNCHER_CAPACITY_BLOCK_CE" ]; then
    if [ -n "$_ce" ] && [ "$_ce" = "${LAUNCHER_FALLBACK_CE:-}" ]; then _ce="$_ce (the pool's fallback)"; fi
    _off="this attempt runs in compute environment ${_ce:-unknown}, not in the block's ($LAUNCHER_CAPACITY_BLOCK_CE), so EC2 does not end it with the block; the command runs to its own end"
  elif [ "$(date +%s)" -ge "$LAUNCHER_CHECKPOINT_AT" ]; then
    _off="this attempt started after the checkpoint time ($(_hhmm "$LAUNCHER_CHECKPOINT_AT") UTC); the command runs until it ends or EC2 ends its instance"
  fi
  if [ -n "$_off" ]; then
    echo "launcher: $_when: no checkpoint signal: $_off" >&2
  elif _private "the checkpoint signal"; then
    _timer=on
  fi
  _checkpoint() {
    _cmd=$1; _first=$2
    _left=$((LAUNCHER_CHECKPOINT_AT - $(date +%s)))
    if [ "$_left" -gt 0 ]; then sleep "$_left"; fi
    kill -0 "$_cmd" 2>/dev/null || return 0
    _pids="$_cmd"; _who="the command (pid $_cmd) so it can checkpoint"
    if [ "${_first##*/}" = torchrun ]; then
      _pids=""
      for _st in /proc/[0-9]*/stat; do
        _line="$(cat "$_st" 2>/dev/null)" || continue
        # shellcheck disable=SC2086 # split on purpose: the stat fields after the name
        set -- ${_line##*) }
        if [ "${2:-}" = "$_cmd" ]; then _p="${_st#/proc/}"; _pids="$_pids ${_p%/stat}"; fi
      done
      _pids="${_pids# }"; _who="torchrun's workers (pids $_pids) so they can checkpoint"
    fi
    if [ -z "$_pids" ]; then
      echo "launcher: $_when: torchrun has no workers to send SIG$_sig to" >&2; return 0
    fi
    # Said and marked first: the command may end at once, and RUN then ends this timer.
    echo "launcher: $_when: sent SIG$_sig to $_who" >&2; : > "$_tmp/checkpoint-sent"
    # shellcheck disable=SC2086 # split on purpose: one argument a pid
    kill -s "$_sig" $_pids 2>/dev/null
  }
fi
## === RUN ===
## A command that cannot be run is said in the user's terms, before it is tried, with the
## shell's exit codes (127: not found, 126: found but not executable), instead of the shell's
## own line (`launcher: line 246: python3: not found`), which reads as the launcher's. The check
## claims only what would fail anyway, so no command that would run is stopped by it: a name
## that no builtin, function or PATH directory has (command -v, then each directory: busybox's
## command -v names the first file of the name, even where a later one is the executable that
## runs), a path to nothing, a directory, a file without an execute bit, a script whose #! line
## names an interpreter that is not there (or ends in a CR). Anything else runs, and whatever
## goes wrong is the shell's or the program's to say. A worker tells the main node's watch.
_unrunnable() {
  _ecode=127; _why=""; _p=""
  case "$1" in
    */*) _p=$1
      if [ ! -e "$_p" ]; then
        case "$_p" in /*) _why="was not found in the image (no such file)";;
          *) _why="was not found in the image (no such file in $(pwd))";; esac
        return 0
      fi
      _ecode=126
      if [ -d "$_p" ]; then _why="is a directory, not a program"; return 0; fi
      if [ ! -x "$_p" ]; then
        case "$_p" in *.py) _how="python3 $_p";; *.sh) _how="sh $_p";; *) _how="sh $_p, python3 $_p";; esac
        _why="is not executable: run it through its interpreter ($_how), or chmod +x it before the image is built"
        return 0
      fi;;
    *)
      _cv="$(command -v "$1" 2>/dev/null)" || _cv=""
      case "$_cv" in "") ;; */*) ;; *) return 1;; esac
      _rest="${PATH:-}:"; _file=""
      while [ -n "$_rest" ]; do
        _d="${_rest%%:*}"; _rest="${_rest#*:}"
        if [ -f "${_d:-.}/$1" ]; then
          if [ -x "${_d:-.}/$1" ]; then _p="${_d:-.}/$1"; break; fi
          _file="${_file:-${_d:-.}/$1}"
        fi
      done
      # One found, or command -v's own: it runs (a script's #! is not checked here: a shell
      # whose execve fails with ENOENT goes on to the next directory).
      if [ -n "$_p" ] || { [ -n "$_cv" ] && [ -x "$_cv" ]; }; then return 1; fi
      if [ -n "$_file" ]; then
        _ecode=126; _why="is not executable ($_file has no execute permission): chmod +x it before the image is built"
      elif [ "$1" = torchrun ]; then
        _why="was not found in the image (PATH=${PATH:-}): torchrun comes with PyTorch (--torchrun runs it), so the image needs PyTorch"
      else
        _why="was not found in the image (PATH=${PATH:-}): use an image that has it, or give its full path"
      fi
      return 0;;
  esac
  # A script: the kernel runs the interpreter its #! line names (tr: bash warns of a NUL).
  [ "$(head -c 2 "$_p" 2>/dev/null | tr -d '\000')" = "#!" ] || return 1
  _line="$(head -n 1 "$_p" 2>/dev/null)"; _line="${_line#??}"
  _line="${_line#"${_line%%[! ]*}"}"; _int="${_line%% *}"; _arg="${_line#"$_int"}"
  _arg="${_arg#"${_arg%%[! ]*}"}"; _arg="${_arg%% *}"
  _ecode=127
  case "$_int" in *"$(printf '\r')")
    _why="cannot be run: its #! line ends in a Windows line ending (CR), so the interpreter's name has a CR in it; save it with Unix line endings (dos2unix FILE)"
    return 0;; esac
  if [ -n "$_int" ] && [ ! -e "$_int" ]; then
    _why="cannot be run: its #! line names $_int, which is not in the image"; return 0
  fi
  if [ "${_int##*/}" = env ] && [ -n "$_arg" ] && [ "${_arg#-}" = "$_arg" ] && ! command -v "$_arg" >/dev/null 2>&1; then
    _why="cannot be run: its #! line asks for $_arg, which was not found in the image (PATH=${PATH:-})"; return 0
  fi
  return 1
}
if [ "$#" -gt 0 ] && _unrunnable "$1"; then
  # printf, not echo: dash's echo reads backslashes in the command's name as escapes.
  printf '%s\n' "launcher: your command '$1' $_why" >&2
  _report "$_ecode"; exit "$_ecode"
fi
## Run the command as a child (not exec) while the watcher or the node watch runs, so the last
## lines are flushed and the outcome is read after the command ends; signals from Batch (via
## the init process) are passed on.
if [ -z "$_nccl" ] && [ -z "$_monitor" ] && [ -z "$_timer" ] && [ -z "${_stepped:-}" ]; then
  exec "$@"
fi
"$@" & _child=$!
if [ -n "$_timer" ]; then _checkpoint "$_child" "$1" & _timer=$!; fi
trap 'kill -TERM "$_child" 2>/dev/null' TERM INT
if [ -n "$_nccl" ]; then _nccl_watch & _watch=$!; fi
if [ -n "$_monitor" ]; then
  if [ "$LAUNCHER_NODE_RANK" = 0 ]; then
    LAUNCHER_WATCH_TOKEN="$_wtoken" python3 -c '@MONITOR_MAIN@' "$_mport" "$_child" "$_monitor" "$LAUNCHER_NNODES" "$_mstart" "$LAUNCHER_MAIN_ADDR" & _mon=$!
  else
    LAUNCHER_WATCH_TOKEN="$_wtoken" python3 -c '@MONITOR_WORKER@' "$LAUNCHER_MAIN_ADDR" "$_mport" "$LAUNCHER_NODE_RANK" "$_monitor" "$_mstart" & _mon=$!
  fi
fi
wait "$_child"; _code=$?
while kill -0 "$_child" 2>/dev/null; do wait "$_child"; _code=$?; done
if [ -n "$_timer" ]; then kill "$_timer" 2>/dev/null; fi
if [ -n "$_watch" ]; then
  : > "$_seen/stop"
  while kill -0 "$_watch" 2>/dev/null; do wait "$_watch"; done
fi
if [ -n "$_nccl" ] && [ -s "$_seen/verdict" ]; then
  read -r _code _why < "$_seen/verdict"
  if [ "$_code" = @BAD_HOST_EXIT@ ]; then _say_bad_host "$_why"; else _say_efa_error "$_why"; fi
fi
if [ -n "$_timer" ] && [ -e "$_tmp/checkpoint-sent" ] && [ "$_code" != 0 ]; then
  echo "launcher: the command ended with exit code $_code after the checkpoint signal: ending with exit code @NODE_LOST_EXIT@ so that the job is tried again, from its checkpoint, on the next Capacity Block or the pool's fallback" >&2
  _code=@NODE_LOST_EXIT@
fi
if [ -n "$_monitor" ]; then
  if [ "$LAUNCHER_NODE_RANK" != 0 ]; then
    echo "$_code" > "$_monitor/exit"; _t=0
    while kill -0 "$_mon" 2>/dev/null && [ "$_t" -lt 20 ]; do sleep 0.5; _t=$((_t + 1)); done
  else
    kill "$_mon" 2>/dev/null
    if [ -s "$_monitor/strangers" ]; then
      read -r _n _from < "$_monitor/strangers"
      echo "launcher: node watch: ignored $_n connection(s) without this job's token, the first from $_from" >&2
    fi
    if [ -s "$_monitor/missing" ]; then
      echo "launcher: node(s) $(cat "$_monitor/missing") never started (no word within $_mstart s): ending with exit code @NODE_LOST_EXIT@ so that the job is tried again" >&2
      exit @NODE_LOST_EXIT@
    fi
    if [ -s "$_monitor/lost" ]; then
      echo "launcher: node(s) $(tr '\n' ' ' < "$_monitor/lost")lost: ending with exit code @NODE_LOST_EXIT@ so that the job is tried again" >&2
      exit @NODE_LOST_EXIT@
    fi
    if [ -s "$_monitor/failed" ]; then
      read -r _wnode _wcode < "$_monitor/failed"
      echo "launcher: node $_wnode failed (exit code $_wcode): the job stops" >&2
      # A worker's bad host or misbuilt image decides the job's fate: the retry rules read
      # the main node's code. A worker's own failure is the job's exit code too (status
      # shows the main node's), where the main node's command only ended because the watch
      # stopped it (SIGTERM: 143) or succeeded; a worker's 75 is not, the rules would retry it.
      case "$_wcode" in
        @EFA_REQUIRED_EXIT@|@BAD_HOST_EXIT@) _code=$_wcode;;
        @NODE_LOST_EXIT@) [ "$_code" = 0 ] && _code=1;;
        *) case "$_code" in 0|143) _code=$_wcode;; esac;;
      esac
    fi
  fi
fi
exit "$_code"
#