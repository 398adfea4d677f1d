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

SUBCOMMANDS = ("check", "run", "status", "wrapup", "verify", "new")
EXIT_BAD_INPUT = 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        command, rest = argv[0], argv[1:]
    else:
        command, rest = "app", argv
    parser = _parsers()[command]
    args = parser.parse_args(rest)
    from .campaign import PlanError
    from .engine.errors import EngineError

    try:
        return int(globals()[f"_cmd_{command}"](args) or 0)
    except PlanError as exc:
        for line in exc.problems:
            print(f"itera-tui: {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
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


def _parsers() -> dict[str, argparse.ArgumentParser]:
    def base(name, help_text):
        return argparse.ArgumentParser(prog=f"itera-tui {name}".strip(), description=help_text)

    app = base("", "The control room for a rented-GPU training campaign. Subcommands: "
                   + ", ".join(SUBCOMMANDS) + " (itera-tui SUBCOMMAND --help).")
    app.add_argument("path", nargs="?", default="campaign.toml", help="campaign file")
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
    run = base("run", "Run the campaign (same engine as the control room).")
    run.add_argument("path", nargs="?", default="campaign.toml")
    run.add_argument("--headless", action="store_true", help="no UI: one line per event")
    run.add_argument("--decide", default=None,
                     help="decision after the pilot: continue | drop:ID[,ID] | wrapup")
    run.add_argument("--no-wrapup", action="store_true", help="stop before the wrap-up")
    run.add_argument("--lot", metavar="NAME", default=None,
                     help="drive only the share of lot NAME's box (another box of a "
                          "campaign over several; the first box starts it with this)")
    status = base("status", "State replayed from the ledger.")
    status.add_argument("path", nargs="?", default="campaign.toml")
    status.add_argument("--json", action="store_true")
    wrapup = base("wrapup", "Stop what runs (checkpoint first), build and verify the bundle.")
    wrapup.add_argument("path", nargs="?", default="campaign.toml")
    wrapup.add_argument("--json", action="store_true")
    wrapup.add_argument("--lot", metavar="NAME", default=None,
                        help="on another box of a campaign over several: wrap up lot "
                             "NAME's share (its part)")
    verify = base("verify", "Re-verify a bundle directory.")
    verify.add_argument("bundle")
    verify.add_argument("--json", action="store_true")
    new = base("new", "Start the campaign afresh: archive .itera/ and the outputs first.")
    new.add_argument("path", nargs="?", default="campaign.toml")
    new.add_argument("--yes", action="store_true", help="do not ask (scripts)")
    return {"app": app, "check": check, "run": run, "status": status, "wrapup": wrapup,
            "verify": verify, "new": new}


def _cmd_check(args) -> int:
    from .campaign import PlanError, check_summary, load_plan, render_check

    plan = load_plan(args.path, check_files=not args.no_files)
    if args.prior is not None or plan.campaign.prior is not None:
        from .bundle.prior import prior_plan

        plan = prior_plan(plan, args.prior, True if args.calibrated else None)
    elif args.calibrated:
        raise PlanError(["--calibrated: needs --prior BUNDLE (or [campaign] prior), the "
                         "bundle whose measurements calibrate the plan"])
    summary = check_summary(plan)
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
    return EXIT_BAD_INPUT if hosts and not all(h.ok for h in hosts) else 0


def _cmd_run(args) -> int:
    from .session.headless import run_headless

    if not args.headless:
        return _cmd_app(args)
    return run_headless(Path(args.path), decide=args.decide, wrapup=not args.no_wrapup,
                        lot=args.lot)


def _cmd_status(args) -> int:
    from .engine.status import print_status

    return print_status(Path(args.path), as_json=args.json)


def _cmd_wrapup(args) -> int:
    from .session.headless import wrapup_command

    return wrapup_command(Path(args.path), as_json=args.json, lot=args.lot)


def _cmd_verify(args) -> int:
    from .bundle.verify import verify_command

    return verify_command(Path(args.bundle), as_json=args.json)


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


def _cmd_app(args) -> int:
    from .app.main import run_app

    return run_app(Path(args.path))


if __name__ == "__main__":
    sys.exit(main())
