"""Independent check of our TensorBoard event files for tensorboard_python_test.

Verifies every TFRecord's framing with its own CRC-32C, parses each record with the protobuf
library through a hand-written descriptor of TensorFlow's Event/Summary messages (field numbers as
in tensorboard/compat/proto/event.proto and summary.proto), checks that re-serializing gives our
exact bytes, and prints one line per event:
    EVENT <wall_time repr> <step> <file_version or -> [<tag>=<simple_value repr>]...
usage: decode_tfevents.py EVENT_FILE
"""
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    fdp = descriptor_pb2.FileDescriptorProto(name="ds_tfevent.proto", package="dstest", syntax="proto3")
    value = fdp.message_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
    summary = fdp.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".dstest.Value")
    event = fdp.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".dstest.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("dstest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def main():
    Event = event_class()
    data = open(sys.argv[1], "rb").read()
    at, n = 0, 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        (len_crc,) = struct.unpack_from("<I", data, at + 8)
        assert len_crc == masked(crc32c(data[at:at + 8])), ("length crc", at)
        payload = data[at + 12:at + 12 + length]
        assert len(payload) == length, ("truncated", at)
        (data_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        assert data_crc == masked(crc32c(payload)), ("data crc", at)
        ev = Event.FromString(payload)
        assert ev.SerializeToString() == payload, ("not protobuf's canonical encoding", at)
        values = " ".join("%s=%r" % (v.tag, v.simple_value) for v in ev.summary.value)
        print("EVENT %r %d %s %s" % (ev.wall_time, ev.step, ev.file_version or "-", values))
        at += 16 + length
        n += 1
    print("OK %d" % n)


main()
