import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.FileDescriptor;

import java.io.FileOutputStream;
import java.util.LinkedHashMap;
import java.util.Map;

/** Writes the descriptors of rocketmq-proto's generated classes (and their imports) as one
 * FileDescriptorSet: args[0] is the output file. Set-up only (compat_tests/drivers/grpc5/setup.sh). */
public final class DumpProto {
    private DumpProto() {
    }

    private static void add(FileDescriptor file, Map<String, FileDescriptor> out) {
        for (FileDescriptor dep : file.getDependencies()) {
            add(dep, out);
        }
        out.putIfAbsent(file.getName(), file);
    }

    public static void main(String[] args) throws Exception {
        Map<String, FileDescriptor> files = new LinkedHashMap<>();
        add(apache.rocketmq.v2.MQService.getDescriptor(), files);
        add(apache.rocketmq.v2.MQAdmin.getDescriptor(), files);
        FileDescriptorSet.Builder set = FileDescriptorSet.newBuilder();
        for (FileDescriptor f : files.values()) {
            set.addFile(f.toProto());
        }
        try (FileOutputStream out = new FileOutputStream(args[0])) {
            set.build().writeTo(out);
        }
    }
}
