import Foundation
import MAMProtection

StandardDescriptors.occupyClosed()
if let problem = RawArguments.invalidUTF8(argc: CommandLine.argc, argv: CommandLine.unsafeArgv) {
    Output.error(problem)
    exit(ExitCode.usage.rawValue)
}
let arguments = Array(CommandLine.arguments.dropFirst())
if InheritedDescriptors.startsDaemon(arguments) {
    InheritedDescriptors.closeAll()
}
exit(CommandLineTool.run(arguments, environment: ProcessInfo.processInfo.environment).rawValue)
