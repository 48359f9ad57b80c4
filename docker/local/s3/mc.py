#!/opt/moto/bin/python
"""The `mc` subcommands compose runs, on boto3 against an S3 server's S3 and IAM APIs."""

import json
import os
import sys
import urllib.request
from pathlib import Path

import boto3

CONFIG = Path(os.environ.get("MC_CONFIG_DIR", "/tmp/.mc")) / "aliases.json"


def aliases() -> dict:
    return json.loads(CONFIG.read_text()) if CONFIG.exists() else {}


def client(alias: str, service: str):
    url, key, secret = aliases()[alias]
    return boto3.client(
        service,
        endpoint_url=url,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        region_name="us-east-1",
    )


def main(argv: list[str]) -> int:
    match argv:
        case ["alias", "set", alias, url, key, secret]:
            CONFIG.parent.mkdir(parents=True, exist_ok=True)
            CONFIG.write_text(json.dumps({**aliases(), alias: [url, key, secret]}))
        case ["ready", "local"]:
            urllib.request.urlopen("http://127.0.0.1:9000/moto-api/", timeout=5)
        case ["mb", *options, target] if set(options) <= {"--ignore-existing"}:
            alias, bucket = target.split("/", 1)
            s3 = client(alias, "s3")
            if bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
                s3.create_bucket(Bucket=bucket)
            elif "--ignore-existing" not in options:
                print(f"mc: bucket {bucket} exists", file=sys.stderr)
                return 1
        case ["admin", "user", "add", alias, user, _secret]:
            iam = client(alias, "iam")
            if user not in [u["UserName"] for u in iam.list_users()["Users"]]:
                iam.create_user(UserName=user)
        case ["admin", "user", "info", alias, user]:
            iam = client(alias, "iam")
            attached = iam.list_attached_user_policies(UserName=user)["AttachedPolicies"]
            print(f"AccessKey: {user}\nPolicyName: {','.join(p['PolicyName'] for p in attached)}")
        case ["admin", "policy", "create", alias, name, path]:
            iam = client(alias, "iam")
            if name not in [p["PolicyName"] for p in iam.list_policies(Scope="Local")["Policies"]]:
                iam.create_policy(PolicyName=name, PolicyDocument=Path(path).read_text())
        case ["admin", "policy", "attach", alias, name, "--user", user]:
            iam = client(alias, "iam")
            arn = next(
                p["Arn"]
                for p in iam.list_policies(Scope="Local")["Policies"]
                if p["PolicyName"] == name
            )
            iam.attach_user_policy(UserName=user, PolicyArn=arn)
        case _:
            print(f"mc: not a subcommand this stand-in has: {' '.join(argv)}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
