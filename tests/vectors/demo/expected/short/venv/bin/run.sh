#!/usr/bin/env bash --init-file /srv/box/venv/etc/rc
echo /srv/box
