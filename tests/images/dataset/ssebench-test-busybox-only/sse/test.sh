#!/bin/sh
echo test
