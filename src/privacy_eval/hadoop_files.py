"""Hadoop FileSystem calls on paths relative to a database's folder, for the commit
protocol of the results tables (commit.py).

Through the JVM, so that HDFS and other Hadoop file systems work like the local disk.
"""

from __future__ import annotations

import json
import os
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from privacy_eval.errors import CommitError


class DatabaseFiles:
    """The folder of one database, through its file system.

    Relative paths are '/'-joined names that need no escaping: table names, transaction
    names and Spark's already escaped partition folder names.
    """

    def __init__(self, spark: SparkSession, database: str) -> None:
        context = spark.sparkContext
        self._path = context._jvm.org.apache.hadoop.fs.Path
        # The catalog's own URI for the folder: the place Spark reads the tables from.
        location = spark._jsparkSession.sessionState().catalog().getDatabaseMetadata(database).locationUri()
        self._root = self._path(location)
        self._fs = self._root.getFileSystem(context._jsc.hadoopConfiguration())

    def _resolve(self, relative: str) -> Any:
        path = self._root
        for name in relative.split("/"):
            path = self._path(path, name)
        return path

    def uri(self, relative: str) -> str:
        return str(self._resolve(relative).toString())

    def exists(self, relative: str) -> bool:
        return bool(self._fs.exists(self._resolve(relative)))

    def mkdirs(self, relative: str) -> None:
        if not self._fs.mkdirs(self._resolve(relative)):
            raise CommitError(f"results: cannot create {relative} in the database folder")

    def delete(self, relative: str) -> None:
        self._fs.delete(self._resolve(relative), True)

    def list_dirs(self, relative: str) -> list[str]:
        path = self._resolve(relative)
        if not self._fs.exists(path):
            return []
        return [str(s.getPath().getName()) for s in self._fs.listStatus(path) if s.isDirectory()]

    def modified(self, relative: str) -> float | None:
        """Last modification, in seconds since the epoch; None when it does not exist."""
        path = self._resolve(relative)
        try:
            return self._fs.getFileStatus(path).getModificationTime() / 1000.0
        except Py4JJavaError:
            if self._fs.exists(path):
                raise
            return None

    def move(self, source: str, target: str) -> bool:
        """Rename `source` to `target` atomically; False when `source` does not exist.

        `target` must not exist and its parent must: under those conditions no Hadoop
        file system moves into or copies instead (the local one falls back to a copy,
        which is not atomic, when a plain rename fails).
        """
        src, dst = self._resolve(source), self._resolve(target)
        if self._fs.exists(dst) or not self._fs.exists(dst.getParent()):
            raise CommitError(f"results: cannot rename to {target}: it exists or its folder does not")
        try:
            if self._fs.rename(src, dst):
                return True
        except Py4JJavaError:
            if self._fs.exists(src):
                raise
            return False  # gone meanwhile (another recoverer claimed it)
        if self._fs.exists(src):
            raise CommitError(f"results: the file system refused to rename {source} to {target}")
        return False

    def create_exclusive(self, relative: str, text: str) -> bool:
        """Create a file holding `text`, atomically, unless it exists; False when it does.

        On a local disk with O_CREAT|O_EXCL (Hadoop's local create checks, then creates);
        elsewhere with the file system's create without overwrite (atomic on HDFS).
        """
        path = self._resolve(relative)
        data = text.encode("utf-8")
        uri = path.toUri()
        if uri.getScheme() in (None, "file"):
            try:
                handle = os.open(str(uri.getPath()), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            try:
                os.write(handle, data)
                os.fsync(handle)
            finally:
                os.close(handle)
            return True
        try:
            stream = self._fs.create(path, False)
        except Py4JJavaError:
            if self._fs.exists(path):
                return False
            raise
        try:
            stream.write(bytearray(data), 0, len(data))
            stream.hsync()
        finally:
            stream.close()
        return True

    def read_text(self, relative: str) -> str | None:
        """A small file's text; None when it does not exist."""
        path = self._resolve(relative)
        try:
            stream = self._fs.open(path)
        except Py4JJavaError:
            if self._fs.exists(path):
                raise
            return None
        try:
            return bytes(stream.readAllBytes()).decode("utf-8")
        finally:
            stream.close()

    def read_json(self, relative: str) -> dict[str, Any] | None:
        path = self._resolve(relative)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            return json.loads(bytes(stream.readAllBytes()).decode("utf-8"))
        finally:
            stream.close()

    def write_json(self, relative: str, value: dict[str, Any]) -> None:
        data = bytearray(json.dumps(value, indent=1, sort_keys=True).encode("utf-8"))
        stream = self._fs.create(self._resolve(relative), False)
        try:
            stream.write(data, 0, len(data))
            stream.hsync()  # on disk (HDFS: on the datanodes) before the rename commits it
        finally:
            stream.close()
