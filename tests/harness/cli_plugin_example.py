"""A stand-in for the nightly modules: a subcommand registered through ``add_cli(subparsers)``."""


def add_cli(subparsers):
    p = subparsers.add_parser("hello", help="test subcommand")
    p.add_argument("--code", type=int, default=0)
    p.set_defaults(func=lambda args: args.code)
