"""`itera-tui` entry point: the control room and its subcommands.

Each subcommand imports its layer lazily, so `check` never loads textual and
the control room never loads torch. Bad input is one clear message on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SUBCOMMANDS = ("check", "run", "status", "wrapup", "verify", "new", "notify", "checkpoint",
               "stop", "drop", "decide", "pause", "resume", "engine", "attach", "init",
               "hosts", "fetch")
EXIT_BAD_INPUT = 2
EXIT_DOES_NOT_FIT = 1  # a valid plan whose calendar overruns its window


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        command, rest = argv[0], argv[1:]
    else:
        command, rest = "app", argv
    parser = _parsers(only_app=command == "app")[command]
    args = parser.parse_intermixed_args(rest)
    _folder_means_its_campaign(command, args)
    from .campaign import PlanError
    from .engine.errors import EngineError

    if command == "app":  # the room owns the terminal; its views clean what they show
        return _guarded(command, args, PlanError, EngineError)
    from .campaign.text import TerminalGuard  # text a run controls is never printed raw

    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalGuard(sys.stdout), TerminalGuard(sys.stderr)
    try:
        return _guarded(command, args, PlanError, EngineError)
    finally:
        sys.stdout, sys.stderr = streams


NOT_A_CAMPAIGN_PATH = ("verify", "attach", "init", "fetch")  # a bundle, a far folder, ...


def _folder_means_its_campaign(command: str, args) -> None:
    """`itera-tui status DIR` as `itera-tui DIR`, `resume` and `init` take it: a folder
    given where a campaign file is expected means the campaign.toml in it (one rule for
    every command, rather than "[Errno 21] Is a directory" from some)."""
    path = getattr(args, "path", None)
    if command in NOT_A_CAMPAIGN_PATH or not isinstance(path, str) or "://" in path:
        return
    if Path(path).is_dir():
        args.path = str(Path(path) / "campaign.toml")


def _guarded(command, args, PlanError, EngineError) -> int:
    from .engine.errors import EXIT_LEDGER_UNWRITABLE, LedgerUnwritable

    try:
        return int(globals()[f"_cmd_{command}"](args) or 0)
    except PlanError as exc:
        for line in exc.problems:
            print(f"itera-tui: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except LedgerUnwritable as exc:  # the engine stopped: one line, its own exit status
        print(f"itera-tui: {exc}", file=sys.stderr)
        return EXIT_LEDGER_UNWRITABLE
    except EngineError as exc:
        print(f"itera-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `itera-tui check --json | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("itera-tui: interrupted; runs keep going in their own sessions",
              file=sys.stderr)
        return 130


WITHOUT_STORE = (("--without-store",), {
    "action": "store_true",
    "help": "start although [store] cannot be written (check refuses it, exit 2): the "
            "campaign runs with no off-box copy (kept for it: its engine starts no mirror, "
            "and never advises a `resume` from the store)"})


def _parsers(only_app: bool = False) -> dict[str, argparse.ArgumentParser]:
    """Every command's parser; `only_app`: the room's alone (`itera-tui PATH` opens it, and
    building the other eighteen cost its first paint about 3 ms of CPU)."""
    def base(name, help_text):
        return argparse.ArgumentParser(prog=f"itera-tui {name}".strip(), description=help_text)

    app = base("", "The control room for a rented-GPU training campaign. No campaign.toml "
                   "yet? `itera-tui init DIR` writes a template to edit, `itera-tui init "
                   "--demo DIR` the embedded demo. Subcommands: "
                   + ", ".join(SUBCOMMANDS) + " (itera-tui SUBCOMMAND --help).")
    app.add_argument("path", nargs="?", default="campaign.toml", help="campaign file")
    app.add_argument("--host", metavar="DEST:DIR", default=None,
                     help="follow a campaign on another box through ssh: an ssh destination "
                          "and the campaign folder there (user@box:~/camp)")
    app.epilog = ("Beside the campaign's sections, campaign.toml may hold [notify] (notices "
                  "to a phone or a chat through Apprise URLs; `itera-tui notify --test` sends "
                  "one) and [store] (an off-box copy of the ledger, checkpoints and bundle at "
                  "an fsspec URL: s3://, ssh://, a folder).")
    if only_app:
        return {"app": app}
    check = base("check", "Validate the plan; print calendar, window fit, cost and advice.")
    check.add_argument("path", nargs="?", default="campaign.toml")
    check.add_argument("--json", action="store_true", help="one JSON object on stdout")
    check.add_argument("--no-files", action="store_true",
                       help="skip corpus file checks (when planning off the box)")
    check.add_argument("--prior", metavar="BUNDLE", default=None,
                       help="a verified bundle of an earlier campaign on the same corpus: "
                            "show the duration its measurements predict beside each "
                            "hand-written one (default: [campaign] prior)")
    check.add_argument("--calibrated", action="store_true",
                       help="plan the calendar, fit and advice with the calibrated durations")
    check.add_argument("--hosts", action="store_true",
                       help="ask each lot's host once over ssh whether it can run its share")
    check.add_argument("--store", action="store_true",
                       help="time a small round trip to [store] (write, read back, delete) "
                            "and plan the bundle's delivery with the measured rates")
    check.add_argument("--without-store", action="store_true",
                       help="check the plan as `run --without-store` would start it: the "
                            "[store] is not asked whether it can be written (planning off "
                            "the box, or a store made later)")
    run = base("run", "Run the campaign (same engine as the control room).")
    run.add_argument("path", nargs="?", default="campaign.toml")
    run.add_argument("--headless", action="store_true", help="no UI: one line per event")
    run.add_argument("--decide", default=None,
                     help="decision after the pilot: continue | drop:ID[,ID] | wrapup")
    run.add_argument("--no-wrapup", action="store_true", help="stop before the wrap-up")
    run.add_argument("--allow-over", action="store_true",
                     help="start a plan that does not fit its window (check exits 1 on it)")
    run.add_argument("--force-continue", action="store_true",
                     help="continue after the pilot even when the control's pilot failed")
    run.add_argument("--lot", metavar="NAME", default=None,
                     help="drive only the share of lot NAME's box (another box of a "
                          "campaign over several; the first box starts it with this)")
    run.add_argument(*WITHOUT_STORE[0], **WITHOUT_STORE[1])
    status = base("status", "State replayed from the ledger.")
    status.add_argument("path", nargs="?", default="campaign.toml")
    status.add_argument("--json", action="store_true")
    wrapup = base("wrapup", "Stop what runs (checkpoint first), build and verify the bundle.")
    wrapup.add_argument("path", nargs="?", default="campaign.toml")
    wrapup.add_argument("--json", action="store_true")
    wrapup.add_argument("--lot", metavar="NAME", default=None,
                        help="on another box of a campaign over several: wrap up lot "
                             "NAME's share (its part)")
    verify = base("verify", "Re-verify a bundle directory, or a bundle in a store (a URL: "
                            "every file read back there and hashed against its manifest).")
    verify.add_argument("bundle", help="a bundle folder, or its store URL "
                                       "(s3://bucket/prefix/LOT/bundle, sftp://..., file://...)")
    verify.add_argument("--json", action="store_true")
    store_options = ("--option", {"metavar": "KEY=VALUE", "action": "append", "default": [],
                                  "help": "a store filesystem option (endpoint_url=..., "
                                          "profile=...; never a secret: credentials come "
                                          "from the environment, ~/.aws or ~/.ssh)"})
    verify.add_argument(store_options[0], **store_options[1])
    fetch = base("fetch", "Copy a bundle out of its store, each file checked against the "
                          "manifest as it arrives (kept only when it matches).")
    fetch.add_argument("url", help="the bundle's store URL (the ending and the notice say it)")
    fetch.add_argument("dest", nargs="?", default=None, help="folder (default: ./bundle)")
    fetch.add_argument("--json", action="store_true")
    fetch.add_argument(store_options[0], **store_options[1])
    new = base("new", "Start the campaign afresh: archive .itera/ and the outputs first.")
    new.add_argument("path", nargs="?", default="campaign.toml")
    new.add_argument("--yes", action="store_true", help="do not ask (scripts)")
    notify = base("notify", "Notices ([notify]): send a test notice to every address.")
    notify.add_argument("path", nargs="?", default="campaign.toml")
    notify.add_argument("--test", action="store_true", required=True,
                        help="send one test notice per address; one line each; exit 1 if "
                             "any failed")
    parsers = {"app": app, "check": check, "run": run, "status": status, "wrapup": wrapup,
               "verify": verify, "new": new, "notify": notify, "fetch": fetch}

    def action(name, help_text, what=None):
        p = base(name, help_text + " Sent to the running engine; exit 0 done, 1 refused, "
                 "2 bad input, 4 no engine, 6 busy (it takes no more connections now).")
        if what:
            p.add_argument(what[0], help=what[1])
        p.add_argument("path", nargs="?", default="campaign.toml")
        p.add_argument("--json", action="store_true", help='print {"ok", "message"}')
        parsers[name] = p
        return p

    action("checkpoint", "Checkpoint a run now.", ("run", "run id (itera-tui status)"))
    stop = action("stop", "Stop a run (SIGTERM, then SIGKILL after the grace period).",
                  ("run", "run id"))
    stop.add_argument("--reason", required=True, help="why, in words (kept in the ledger)")
    stop.add_argument("--yes", action="store_true",
                      help="stop a mandatory run although the conclusion needs it")
    action("drop", "Drop optional variants (at the decision point: as the decision).",
           ("variants", "variant ids, comma-separated"))
    action("decide", "Answer the decision point.", ("decision", "continue | drop:ID[,ID] | "
                                                                  "wrapup"))
    action("pause", "Pause the queue (running runs go on).")
    resume = action("resume", "Resume the queue; or, given a store URL, continue on this "
                              "box a campaign whose box went away: `itera-tui resume URL "
                              "[DIR] --lot LOT` fetches the "
                              "frozen plan, the ledger and the verified checkpoints into DIR "
                              "(every object checked; exit 2 names a damaged or missing one "
                              "and starts nothing), then starts the engine there.")
    resume.add_argument("dir", nargs="?", default=None,
                        help="with a URL: the folder to continue in (default: .)")
    resume.add_argument("--lot", metavar="LOT", default=None,
                        help="the new box as a [[lot]] of campaign.toml, written inline "
                             "(days or hours, price_usd for the whole lot, gpus): "
                             "'gpu = \"RTX 4090\", days = 3, price_usd = 47.14'")
    resume.add_argument("--part", default=None,
                        help="which box's part of the store (a campaign over several "
                             "boxes); a URL that ends in the part names it already")
    resume.add_argument("--option", metavar="KEY=VALUE", action="append", default=[],
                        help="a store filesystem option (endpoint_url=... for an S3 "
                             "that is not AWS's, as ITERA_STORE_ENDPOINT; never a secret)")
    resume.add_argument("--force", action="store_true",
                        help="the old box is gone although its engine wrote to the store "
                             "within the last 2 minutes without saying it stopped")
    engine = base("engine", "The campaign's engine process: start it detached, stop it on "
                            "purpose (the runs are left alone), or say whether it runs.")
    engine.add_argument("what", choices=("start", "stop", "status"))
    engine.add_argument("path", nargs="?", default="campaign.toml")
    engine.add_argument("--json", action="store_true")
    engine.add_argument(*WITHOUT_STORE[0], **WITHOUT_STORE[1])
    parsers["engine"] = engine
    attach = base("attach", "Connect stdin/stdout to the campaign's engine (for ssh: "
                            "`ssh BOX itera-tui attach --stdio DIR`).")
    attach.add_argument("--stdio", action="store_true", required=True)
    attach.add_argument("--start", action="store_true",
                        help="start the engine first if none runs")
    attach.add_argument("path", nargs="?", default="campaign.toml",
                        help="campaign file or folder")
    parsers["attach"] = attach
    init = base("init", "Write a campaign folder to start from: a commented campaign.toml "
                        "and a tiny training script that runs as it stands, or (--demo) the "
                        "embedded demo campaign with its corpus. Never overwrites a file.")
    init.add_argument("dir", nargs="?", default=".", help="folder to write into (created)")
    init.add_argument("--demo", action="store_true", help="the embedded demo campaign")
    parsers["init"] = init
    hosts = base("hosts", "Each lot's host: install this box's itera-tui there over ssh "
                          "(with the lot's python), then say what each still lacks.")
    hosts.add_argument("what", choices=("install",))
    hosts.add_argument("path", nargs="?", default="campaign.toml")
    parsers["hosts"] = hosts
    return parsers


def _cmd_check(args) -> int:
    from .campaign import PlanError, check_summary, load_plan, render_check

    plan = load_plan(args.path, check_files=not args.no_files)
    if args.prior is not None or plan.campaign.prior is not None:
        from .bundle.prior import prior_plan

        plan = prior_plan(plan, args.prior, True if args.calibrated else None)
    elif args.calibrated:
        raise PlanError(["--calibrated: needs --prior BUNDLE (or [campaign] prior), the "
                         "bundle whose measurements calibrate the plan"])
    from .campaign.preflight import sure_failures

    findings = sure_failures(plan) if not args.no_files else []
    errors = [f.line() for f in findings if f.certain]
    if plan.store is not None and not args.without_store:  # a store it cannot write, or
        from .store.claim import store_refusal  # another campaign's prefix

        errors += store_refusal(plan)
    if errors:  # what will surely fail is bad input: one message each, exit 2
        raise PlanError(errors)
    measured = None
    if args.store:
        plan, measured = _measured_store(plan)
    summary = check_summary(plan, findings=findings)
    if measured is not None and summary.get("store") is not None:
        summary["store"] |= measured
    _refuse_long_deadline(plan)
    hosts = None
    if args.hosts:
        from .remote.hosts import check_hosts

        hosts = check_hosts(plan)
        summary["hosts"] = [h.to_dict() for h in hosts]
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(render_check(summary))
        if hosts is not None:
            lines = [f"  {h.line}" for h in hosts] or ["  no lot names a host: every lot "
                                                       "is this box"]
            print("\n".join(["", "hosts:", *lines]))
    if hosts and not all(h.ok for h in hosts):
        return EXIT_BAD_INPUT
    return 0 if summary["fits"] else EXIT_DOES_NOT_FIT


def _measured_store(plan):
    """`check --store`: the plan with its delivery interval from a measured round trip."""
    from dataclasses import replace

    from .campaign import PlanError

    if plan.store is None:
        raise PlanError(["--store: the plan has no [store] url to measure"])
    from .store import open_store, part_of
    from .store.probe import measure

    try:
        m = measure(open_store(plan.store), part_of(plan))
    except Exception as exc:  # unreachable, refused: said, the plan checked without it
        return plan, {"error": f"{type(exc).__name__}: {exc}"[:300]}
    size = plan.store.bundle_mb * 1e6 if plan.store.bundle_mb else None
    if size is None:
        return plan, {"measured": m.to_dict()}
    hours = m.delivery_s(int(size)) / 3600
    plan = replace(plan, store=replace(plan.store, delivery_hours=hours))
    return plan, {"measured": m.to_dict(), "delivery_hours": round(hours, 6)}


def _campaign(path: str):
    """The plan a client needs (validated: exit 2 on bad input); a folder means its
    campaign.toml."""
    from .session import load_campaign

    target = Path(path)
    if target.is_dir():
        target = target / "campaign.toml"
    return load_campaign(target, check_files=False)


def _cmd_checkpoint(args) -> int:
    from .service.commands import act

    return act(_campaign(args.path), "checkpoint", run=args.run, as_json=args.json)


def _cmd_stop(args) -> int:
    from .service.commands import act

    return act(_campaign(args.path), "stop", run=args.run, reason=args.reason, yes=args.yes,
               as_json=args.json)


def _cmd_drop(args) -> int:
    from .service.commands import act

    ids = [v.strip() for v in args.variants.split(",") if v.strip()]
    return act(_campaign(args.path), "drop", variants=ids, as_json=args.json)


def _cmd_decide(args) -> int:
    from .service.commands import act

    from .engine.decision.answer import Decision

    plan = _campaign(args.path)
    decision = Decision.parse(args.decision).check(plan)  # a typo: exit 2, before any send
    return act(plan, "decide", decision=decision, as_json=args.json)


def _cmd_pause(args) -> int:
    from .service.commands import act

    return act(_campaign(args.path), "pause", as_json=args.json)


def _cmd_resume(args) -> int:
    if "://" in args.path:  # a store URL: the campaign continues on this box
        return _resume_from_store(args)
    if args.dir is not None:
        print(f"itera-tui: resume {args.path} {args.dir}: the first argument is a store URL "
              "(s3://..., sftp://..., file://...) when a folder follows", file=sys.stderr)
        return EXIT_BAD_INPUT
    from .service.commands import act

    return act(_campaign(args.path), "resume", as_json=args.json)


def _resume_from_store(args) -> int:
    from .service.resume import resume_command
    from .store.deliver import options_from_env

    options = options_from_env()
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"itera-tui: --option {item!r}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_BAD_INPUT
        options[key] = value
    code, path = resume_command(args.path, Path(args.dir or "."), options,
                                args.lot,
                                part=args.part, force=args.force)
    if code == 0 and path is not None and sys.stdin.isatty() and sys.stdout.isatty():
        from .app.main import run_app  # a terminal: the room, as `itera-tui` opens it

        return run_app(path)
    return code


def _cmd_engine(args) -> int:
    from .service.commands import engine_command

    return engine_command(_campaign(args.path), args.what, as_json=args.json,
                          without_store=args.without_store)


def _cmd_hosts(args) -> int:
    from .campaign import load_plan
    from .remote.install import install_hosts

    results = install_hosts(load_plan(args.path, check_files=False))
    for line in [f"  {h.line}" for h in results] or ["  no lot names a host: every lot "
                                                      "is this box"]:
        print(line)
    return 0 if all(h.ok for h in results) else EXIT_BAD_INPUT


def _cmd_attach(args) -> int:
    """The far side of an ssh bridge: a relative folder is from the home directory
    (`ssh box itera-tui attach --stdio camp`), as rsync and `[[lot]] dir` read it."""
    import os

    from .service.commands import attach_stdio

    target = Path(os.path.expanduser(args.path))
    if not target.is_absolute() and not target.exists() and os.environ.get("HOME"):
        target = Path(os.environ["HOME"]) / target
    return attach_stdio(_campaign(str(target)), start=args.start)


def _refuse_long_deadline(plan) -> None:
    from .campaign import PlanError
    from .campaign.calendar import build_calendar
    from .campaign.decision_deadline import deadline_problem

    problem = deadline_problem(plan, build_calendar(plan))
    if problem:
        raise PlanError([problem])


def _cmd_run(args) -> int:
    from .campaign import load_plan
    from .campaign.preflight import refuse_sure_failures
    from .engine.decision.answer import Decision
    from .service.headless import run_headless

    # the one place a decision given at start is read from text: a typo is refused
    # before anything starts (exit 2), not after hours of pilot
    decide = Decision.parse(args.decide) if args.decide is not None else None
    plan = load_plan(args.path, check_files=False)
    refuse_sure_failures(plan)  # as `check`: exit 2
    if plan.store is not None:  # a store it cannot write, another campaign's: exit 2
        from .store.claim import refuse_unusable_store

        refuse_unusable_store(plan, go_without=args.without_store)
    refused = _over_window(Path(args.path), args.allow_over)
    if refused:
        return refused
    if not args.headless:
        return _cmd_app(args)
    return run_headless(Path(args.path), decide=decide, wrapup=not args.no_wrapup,
                        force_continue=args.force_continue, lot=args.lot)


def _over_window(path: Path, allow_over: bool) -> int:
    """A campaign not started yet whose plan does not fit its window is refused, the
    advice printed; with --allow-over it starts, the advice printed all the same."""
    from .campaign import check_summary, load_plan
    from .campaign.summary import hours_text

    plan = load_plan(path, check_files=False)
    if (plan.state_dir / "ledger.jsonl").exists():
        return 0  # started already: the frozen plan was accepted then
    summary = check_summary(plan)
    if summary["fits"]:
        return 0
    word = "starting anyway (--allow-over)" if allow_over else "not starting"
    print(f"itera-tui: DOES NOT FIT: {hours_text(summary['over_hours'])} over the "
          f"{hours_text(summary['window_hours'])} window; {word}", file=sys.stderr)
    for a in summary["advice"]:
        print(f"itera-tui: advice ({a['kind']}): {a['text']}", file=sys.stderr)
    if allow_over:
        return 0
    print("itera-tui: see `itera-tui check`; start it anyway with `itera-tui run "
          "--allow-over`", file=sys.stderr)
    return EXIT_DOES_NOT_FIT


def _cmd_status(args) -> int:
    from .service.status import print_status

    return print_status(Path(args.path), as_json=args.json)


def _cmd_wrapup(args) -> int:
    from .service.commands import wrapup
    from .service.headless import wrapup_command

    done = wrapup(_campaign(args.path), as_json=args.json) if args.lot is None else None
    if done is not None:  # through the running engine
        return done
    return wrapup_command(Path(args.path), as_json=args.json, lot=args.lot)


def _cmd_verify(args) -> int:
    if "://" in args.bundle:  # a bundle in a store: checked there, from any machine
        return _stored_bundle(args.bundle, args.option, None, args.json)
    from .bundle.bundle_check import verify_command

    return verify_command(Path(args.bundle), as_json=args.json)


def _cmd_fetch(args) -> int:
    dest = Path(args.dest or "bundle")
    if dest.exists() and any(dest.iterdir()):
        print(f"itera-tui: {dest} is not empty: fetch into a new folder", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _stored_bundle(args.url, args.option, dest, args.json)


def _stored_bundle(url: str, option_args, dest, as_json: bool) -> int:
    from .store import StoreError
    from .store.deliver import check_json, options_from_env, verify_stored_bundle
    from .store.url import STORE_FAILURES, store_failure

    options = options_from_env()
    for item in option_args:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(f"itera-tui: --option {item!r}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_BAD_INPUT
        options[key] = value
    try:
        check = verify_stored_bundle(url, options, dest)
    except StoreError as exc:
        print(f"itera-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except STORE_FAILURES as exc:  # unreachable, refused, no such bucket, no credentials
        print(f"itera-tui: {store_failure(url, exc, options)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if as_json:
        print(check_json(check))
    else:
        for failure in check.failures:
            print(f"FAIL {failure}")
        where = f" and copied to {dest}" if dest is not None and check.verified else ""
        print(f"{check.url}: {'VERIFIED' if check.verified else 'NOT verified'} at the store"
              f"{where} ({check.files} files, {check.bytes / 1e6:.1f} MB read back, "
              f"{len(check.failures)} failures)")
    return 0 if check.verified else 1


def _cmd_notify(args) -> int:
    from .notify.testcmd import notify_test

    return notify_test(Path(args.path))


def _cmd_new(args) -> int:
    from .campaign import load_plan
    from .session.fresh import archive_campaign, what_would_move

    plan = load_plan(args.path, check_files=False)
    found = what_would_move(plan)
    if not found:
        print("nothing to archive: no campaign state here yet; `itera-tui` starts one")
        return 0
    names = ", ".join(str(p.relative_to(plan.root)) for p in found)
    if not args.yes:
        if not sys.stdin.isatty():
            print(f"itera-tui: new would archive {names}; pass --yes to do it without a "
                  "prompt", file=sys.stderr)
            return 2
        if input(f"archive {names} and start afresh? [y/N] ").strip().lower() != "y":
            print("nothing moved")
            return 1
    done = archive_campaign(plan)
    where = done.archive.relative_to(plan.root)
    print(f"archived {', '.join(done.moved)} to {where}/; the next `itera-tui` starts afresh "
          "(a new rental window, a new frozen plan)")
    return 0


def _cmd_init(args) -> int:
    from .demo.scaffold import ScaffoldError, write

    try:
        done = write(args.dir, demo=args.demo)
    except ScaffoldError as exc:
        print(f"itera-tui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    what = "the demo campaign" if done.demo else "a template campaign"
    print(f"wrote {what} into {done.folder}: {', '.join(done.files)}")
    where = "" if done.folder.resolve() == Path.cwd().resolve() else f"cd {done.folder} && "
    print(f"next: {where}itera-tui check   (the plan)   then   itera-tui   (the control room)")
    return 0


def _cmd_app(args) -> int:
    from .app.main import run_app, run_remote_app

    if getattr(args, "host", None):
        return run_remote_app(args.host)
    return run_app(Path(args.path))


if __name__ == "__main__":
    sys.exit(main())
